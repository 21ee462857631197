#include "engine/builder.h"

#include "util/hash.h"
#include "util/interrupt.h"

namespace forge {

using nlohmann::json;

std::string step_key(const StepSpec& spec) {
  Hasher h;
  h.add("forge-step", "1").add("kind", spec.kind).add("version", std::to_string(spec.version));
  for (const auto& [name, value] : spec.inputs) h.add(name, value);
  return h.hex();
}

std::optional<json> Builder::lookup(const StepSpec& spec) {
  auto text = m_store.get_action(step_key(spec));
  if (!text) return std::nullopt;
  json record = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) {
    m_progress.warn("ignoring unreadable result of " + spec.kind + " " + spec.label);
    return std::nullopt;
  }
  if (spec.validate && !spec.validate(record)) return std::nullopt;
  return record;
}

StepOutcome Builder::run(const StepSpec& spec) {
  if (auto record = lookup(spec)) {
    ++m_cached;
    return {*record, true};
  }
  if (interrupted()) return {interrupted_record(), false};
  m_progress.started(spec.kind, spec.label);
  json record;
  try {
    record = spec.run();
  } catch (const std::exception& e) {
    record = failed_record(e.what());
  }
  m_progress.finished();
  // A step that failed while the build was being interrupted was probably
  // stopped by it (its command killed): not a result, so not kept.
  if (interrupted() && !record_ok(record)) return {interrupted_record(), false};
  ++m_run;
  const bool ok = record_ok(record);
  if (!ok) ++m_failed;
  const std::string key = step_key(spec);
  if (ok || spec.cache_failures) m_store.put_action(key, record.dump());
  remember_inputs(spec, key);
  return {record, false};
}

void Builder::keep(const StepSpec& spec, const json& record) {
  const std::string key = step_key(spec);
  m_store.put_action(key, record.dump());
  remember_inputs(spec, key);
}

void Builder::remember_inputs(const StepSpec& spec, const std::string& key) {
  if (spec.name.empty()) return;
  json inputs = json::object();
  for (const auto& [name, value] : spec.inputs) inputs[name] = value;
  json entry{{"key", key}, {"version", spec.version}, {"inputs", inputs}};
  m_store.put_ref("explain/" + spec.name, entry.dump());
}

namespace {
std::string short_value(const std::string& v) {
  return v.size() > 24 ? v.substr(0, 12) + "…" : v;
}
}  // namespace

Explanation Builder::explain(const StepSpec& spec) {
  Explanation e;
  e.key = step_key(spec);
  if (lookup(spec)) {
    e.up_to_date = true;
    e.reasons.push_back(spec.kind + " is up to date (key " + e.key.substr(0, 12) + ")");
    return e;
  }
  auto last = spec.name.empty() ? std::nullopt : m_store.get_ref("explain/" + spec.name);
  json prev = last ? json::parse(*last, nullptr, false) : json();
  if (!prev.is_object()) {
    e.reasons.push_back(spec.kind + " has never run");
    return e;
  }
  if (prev.value("key", "") == e.key) {
    e.reasons.push_back(spec.kind + " last ran with these inputs but failed or its outputs are gone");
    return e;
  }
  if (prev.value("version", 0) != spec.version)
    e.reasons.push_back(spec.kind + " step logic changed (version " +
                        std::to_string(prev.value("version", 0)) + " -> " +
                        std::to_string(spec.version) + ")");
  const json& old = prev["inputs"];
  for (const auto& [name, value] : spec.inputs) {
    if (!old.contains(name))
      e.reasons.push_back("input '" + name + "' is new");
    else if (old[name] != value)
      e.reasons.push_back("input '" + name + "' changed (" +
                          short_value(old[name].get<std::string>()) + " -> " +
                          short_value(value) + ")");
  }
  for (const auto& [name, value] : old.items()) {
    bool present = false;
    for (const auto& in : spec.inputs) present |= in.first == name;
    if (!present) e.reasons.push_back("input '" + name + "' was removed");
  }
  if (e.reasons.empty()) e.reasons.push_back(spec.kind + " result is missing from the store");
  return e;
}

}  // namespace forge
