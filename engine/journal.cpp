#include "engine/journal.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>

namespace forge::mcts {

using nlohmann::json;

namespace {

std::string dump(const json& j) {
  // Candidate reasons come from compilers and workers: never throw on bad UTF-8.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json outcome_json(const Outcome& o) {
  json j{{"status", status_name(o.status)}, {"steps", o.steps}};
  if (o.verified()) j["speedup"] = o.speedup;
  if (!o.reason.empty()) j["reason"] = o.reason;
  return j;
}

json record_json(const JournalRecord& r) {
  return json{{"i", r.iteration},
              {"node", r.node},
              {"parent", r.parent},
              {"action", action_json(r.action)},
              {"outcome", outcome_json(r.outcome)}};
}

// The integer member `name` of `j`, when it is one and fits an int.
std::optional<int> int_member(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned()) {
    const auto v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(INT32_MAX)) return std::nullopt;
    return static_cast<int>(v);
  }
  const auto v = it->get<int64_t>();
  if (v < INT32_MIN || v > INT32_MAX) return std::nullopt;
  return static_cast<int>(v);
}

std::optional<Outcome> outcome_from_json(const json& j, std::string* why) {
  if (!j.is_object()) {
    *why = "outcome is not an object";
    return std::nullopt;
  }
  Outcome o;
  auto status = j.find("status");
  std::optional<Outcome::Status> parsed;
  if (status != j.end() && status->is_string()) parsed = parse_status(status->get<std::string>());
  if (!parsed) {
    *why = "outcome has no known status";
    return std::nullopt;
  }
  o.status = *parsed;
  auto speedup = j.find("speedup");
  if (o.verified()) {
    if (speedup == j.end() || !speedup->is_number() || !std::isfinite(speedup->get<double>()) ||
        speedup->get<double>() <= 0) {
      *why = "verified outcome without a finite speedup > 0";
      return std::nullopt;
    }
    o.speedup = speedup->get<double>();
  } else if (speedup != j.end()) {
    *why = "failed outcome with a speedup";
    return std::nullopt;
  }
  auto reason = j.find("reason");
  if (reason != j.end()) {
    if (!reason->is_string()) {
      *why = "outcome reason is not a string";
      return std::nullopt;
    }
    o.reason = reason->get<std::string>();
  }
  auto steps = j.find("steps");
  if (steps == j.end() || !steps->is_object()) {
    *why = "outcome has no steps object";
    return std::nullopt;
  }
  for (const auto& [name, value] : steps->items()) {
    if (!value.is_string()) {
      *why = "step '" + name + "' is not a string";
      return std::nullopt;
    }
  }
  o.steps = *steps;
  return o;
}

std::optional<JournalRecord> record_from_json(const json& j, int index, std::string* why) {
  const std::string at = "record " + std::to_string(index) + ": ";
  if (!j.is_object()) {
    *why = at + "not an object";
    return std::nullopt;
  }
  JournalRecord r;
  auto i = int_member(j, "i");
  auto node = int_member(j, "node");
  auto parent = int_member(j, "parent");
  if (!i || *i != index || !node || *node != index + 1) {
    *why = at + "out of sequence";
    return std::nullopt;
  }
  if (!parent || *parent < 0 || *parent >= *node) {
    *why = at + "parent is not an earlier node";
    return std::nullopt;
  }
  r.iteration = *i;
  r.node = *node;
  r.parent = *parent;
  auto action_it = j.find("action");
  std::optional<Action> action;
  if (action_it != j.end())
    action = action_from_json(*action_it, why);
  else
    *why = "no action";
  if (!action) {
    *why = at + *why;
    return std::nullopt;
  }
  r.action = std::move(*action);
  auto outcome_it = j.find("outcome");
  std::optional<Outcome> outcome;
  if (outcome_it != j.end())
    outcome = outcome_from_json(*outcome_it, why);
  else
    *why = "no outcome";
  if (!outcome) {
    *why = at + *why;
    return std::nullopt;
  }
  r.outcome = std::move(*outcome);
  return r;
}

}  // namespace

std::string journal_ref(const std::string& target_id) {
  return "journal/" + target_id;
}

std::string format_journal(const JournalData& data, const std::string& context,
                           const json& search_params) {
  json records = json::array();
  for (const JournalRecord& r : data.records) records.push_back(record_json(r));
  return dump(json{{"format", kJournalFormat},
                   {"version", kJournalVersion},
                   {"context", context},
                   {"search", search_params},
                   {"seconds", data.seconds},
                   {"records", std::move(records)}});
}

std::optional<JournalData> parse_journal(std::string_view text, const std::string& context,
                                         const json& search_params, std::string* why) {
  try {
    const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      *why = "is not valid JSON";
      return std::nullopt;
    }
    auto format = j.is_object() ? j.find("format") : j.end();
    if (!j.is_object() || format == j.end() || *format != kJournalFormat) {
      *why = "is not a forge journal";
      return std::nullopt;
    }
    auto version = int_member(j, "version");
    if (!version || *version < kOldestJournalVersion || *version > kJournalVersion) {
      *why = "has another format version";
      return std::nullopt;
    }
    auto ctx = j.find("context");
    if (ctx == j.end() || !ctx->is_string()) {
      *why = "has no context";
      return std::nullopt;
    }
    if (*ctx != context) {
      *why = "was made for another target, device, toolchain or proposer";
      return std::nullopt;
    }
    auto search = j.find("search");
    if (search == j.end() || *search != search_params) {
      *why = "was made with other search settings (seed, exploration, widening)";
      return std::nullopt;
    }
    JournalData data;
    auto seconds = j.find("seconds");
    if (seconds == j.end() || !seconds->is_number() || !std::isfinite(seconds->get<double>()) ||
        seconds->get<double>() < 0) {
      *why = "has no valid seconds";
      return std::nullopt;
    }
    data.seconds = seconds->get<double>();
    auto records = j.find("records");
    if (records == j.end() || !records->is_array()) {
      *why = "has no records";
      return std::nullopt;
    }
    for (size_t k = 0; k < records->size(); ++k) {
      auto r = record_from_json((*records)[k], static_cast<int>(k), why);
      if (!r) return std::nullopt;
      data.records.push_back(std::move(*r));
    }
    return data;
  } catch (const std::exception& e) {  // a backstop: every check above is explicit
    *why = std::string("is unreadable (") + e.what() + ")";
    return std::nullopt;
  }
}

Journal::Journal(store::Store& store, std::string ref, std::string context, json search_params,
                 store::WarnFn warn)
    : m_store(store),
      m_ref(std::move(ref)),
      m_context(std::move(context)),
      m_params(std::move(search_params)),
      m_warn(std::move(warn)) {
  auto text = m_store.get_ref(m_ref);
  if (!text) return;
  std::string why;
  if (auto data = parse_journal(*text, m_context, m_params, &why)) {
    m_data = std::move(*data);
  } else if (m_warn) {
    m_warn("search journal '" + m_ref + "' " + why + "; starting over");
  }
}

void Journal::append(const JournalRecord& record, double seconds) {
  const int next = static_cast<int>(m_data.records.size());
  if (record.iteration != next || record.node != next + 1)
    throw std::invalid_argument("journal append out of sequence: iteration " +
                                std::to_string(record.iteration) + ", expected " +
                                std::to_string(next));
  m_data.records.push_back(record);
  m_data.seconds = seconds;
  write();
}

void Journal::reset(const std::string& why) {
  if (m_warn) m_warn("search journal '" + m_ref + "' " + why + "; starting over");
  m_data = JournalData{};
  write();
}

std::string Journal::text() const {
  return format_journal(m_data, m_context, m_params);
}

void Journal::write() {
  m_store.put_ref(m_ref, text());
}

}  // namespace forge::mcts
