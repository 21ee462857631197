#include "rules/capture/capture.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "rules/capture/ceiling.h"
#include "rules/capture/chain_target.h"
#include "rules/capture/chains.h"
#include "rules/capture/model_command.h"
#include "rules/capture/runtime_build.h"
#include "runtime/common/dtypes.h"
#include "util/atomic_file.h"
#include "util/hash.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string tail(const std::string& s, size_t n = 2000) {
  return s.size() > n ? "…" + s.substr(s.size() - n) : s;
}

// Bytes of a tensor argument, or of every tensor in a list argument.
double tensor_bytes(const json& t) {
  if (!t.is_object()) return 0;
  if (t.value("type", "") == "Tensor") {
    double n = 1;
    for (const auto& s : t.value("sizes", json::array())) n *= s.get<double>();
    return n * dtypes::bytes(t.value("dtype", ""));
  }
  double sum = 0;
  if (t.contains("value") && t["value"].is_array())
    for (const auto& x : t["value"]) sum += tensor_bytes(x);
  return sum;
}

// Moves the process's sample files into the object store; returns the sample
// list with "digest" in place of "file".
json ingest_samples(store::Store& store, const fs::path& dir, const json& samples) {
  json out = json::array();
  for (const auto& sample : samples) {
    json inputs = json::array();
    for (json in : sample.value("inputs", json::array())) {
      if (in.contains("file")) {
        std::string bytes;
        if (!read_file(dir / in["file"].get<std::string>(), &bytes))
          throw std::runtime_error("capture sample " + in["file"].get<std::string>() +
                                   " is missing");
        in["digest"] = store.put_object(bytes);
        in.erase("file");
      }
      inputs.push_back(in);
    }
    out.push_back({{"inputs", inputs}});
  }
  return out;
}

// Merges every process's capture file into one record.
json ingest_capture_dir(store::Store& store, const fs::path& dir, int samples_cap) {
  std::map<std::string, json> entries;  // by op + signature
  std::map<std::string, json> outer;
  // Data flow (runtime/capture/flows.h), keyed by the entries' op + signature:
  // each process numbers its own entries.
  std::map<std::tuple<std::string, long, std::string, long>, long> flows;  // (from, out, to, in) -> calls
  std::map<std::pair<std::string, long>, long> produced;                   // (entry, out) -> tensors
  // Each process's trace (flows.h): its reads with entries by op + signature.
  struct Read {
    long from_call;
    std::string from;
    long out, to_call;
    std::string to;
    long in;
  };
  struct Trace {
    std::vector<Read> reads;
    json open = json::array();  // integers
    bool truncated = false;
  };
  std::vector<Trace> traces;
  int processes = 0;
  std::string timing;
  // Each module class's forward code digest (runtime/autoload: "module_code:<class>");
  // "" where processes disagree, so no packaged chain replaces that forward.
  json module_code = json::object();
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    std::string text;
    read_file(e.path(), &text);
    json proc = json::parse(text, nullptr, false);
    if (!proc.is_object() || proc.value("version", 0) != 1)
      throw std::runtime_error("unreadable capture file " + e.path().filename().string());
    ++processes;
    timing = proc.value("timing", "");
    const json info = proc.value("info", json::object());
    for (const auto& [k, v] : info.items()) {
      if (k.rfind("module_code:", 0) != 0 || !v.is_string()) continue;
      const std::string cls = k.substr(12);
      module_code[cls] = module_code.contains(cls) && module_code[cls] != v ? json("") : v;
    }
    std::map<long, std::string> key_of_id;
    for (const auto& b : proc.value("backend_ops", json::array())) {
      std::string op = b.value("op", "");
      if (op.rfind("aten::", 0) == 0) op = op.substr(6);
      std::string overload = b.value("overload", "");
      if (!overload.empty()) op += "." + overload;
      std::string outer_op = b.value("outer_op", "");
      if (outer_op.rfind("aten::", 0) == 0) outer_op = outer_op.substr(6);
      const std::string sig = b.value("signature", "");
      if (b.contains("id") && b["id"].is_number_integer()) key_of_id[b["id"].get<long>()] = op + "\n" + sig;
      json& merged = entries[op + "\n" + sig];
      if (merged.is_null()) {
        merged = {{"op", op},
                  {"outer_op", outer_op},
                  {"signature", sig},
                  {"args", b.value("args", json::array())},
                  {"outputs", b.value("outputs", json::array())},
                  {"calls", 0},
                  {"time_us", 0.0},
                  {"samples", json::array()}};
      }
      // Inputs a call changed (runtime/capture/changes.h): marked on their
      // argument records, which every request and package entry carries.
      for (const auto& i : b.value("changed", json::array()))
        if (i.is_number_integer() && i.get<long>() >= 0 && i.get<size_t>() < merged["args"].size() &&
            merged["args"][i.get<size_t>()].is_object())
          merged["args"][i.get<size_t>()]["changed"] = true;
      merged["kind"] = b.value("kind", "kernel");
      merged["dispatch_key"] = b.value("dispatch_key", "CPU");
      // The module paths the calls ran under (runtime/capture/modules.h) -> calls.
      if (b.contains("modules") && b["modules"].is_object()) {
        json& mods = merged["modules"];
        if (!mods.is_object()) mods = json::object();
        for (const auto& [path, n] : b["modules"].items())
          if (n.is_number_integer()) mods[path] = mods.value(path, 0L) + n.get<long>();
      }
      merged["calls"] = merged["calls"].get<long>() + b.value("calls", 0L);
      merged["time_us"] = merged["time_us"].get<double>() + b.value("time_us", 0.0);
      for (const auto& s : ingest_samples(store, dir, b.value("samples", json::array())))
        if (static_cast<int>(merged["samples"].size()) < samples_cap) merged["samples"].push_back(s);
    }
    auto key = [&](const json& f, const char* field) -> const std::string* {
      auto it = f.contains(field) && f[field].is_number_integer() ? key_of_id.find(f[field].get<long>())
                                                                   : key_of_id.end();
      return it == key_of_id.end() ? nullptr : &it->second;
    };
    for (const auto& f : proc.value("flows", json::array())) {
      const std::string *from = key(f, "from"), *to = key(f, "to");
      if (from && to) flows[{*from, f.value("out", 0L), *to, f.value("in", 0L)}] += f.value("calls", 0L);
    }
    for (const auto& p : proc.value("produced", json::array()))
      if (const std::string* e = key(p, "entry")) produced[{*e, p.value("out", 0L)}] += p.value("tensors", 0L);
    if (const json trace = proc.value("trace", json()); trace.is_object()) {
      Trace t;
      for (const auto& r : trace.value("reads", json::array())) {
        if (!r.is_array() || r.size() != 6 ||
            !std::all_of(r.begin(), r.end(), [](const json& v) { return v.is_number_integer(); }))
          continue;
        auto it_from = key_of_id.find(r[1].get<long>()), it_to = key_of_id.find(r[4].get<long>());
        if (it_from == key_of_id.end() || it_to == key_of_id.end()) continue;
        t.reads.push_back({r[0].get<long>(), it_from->second, r[2].get<long>(), r[3].get<long>(), it_to->second,
                           r[5].get<long>()});
      }
      for (const auto& c : trace.value("open", json::array()))
        if (c.is_number_integer()) t.open.push_back(c);
      t.truncated = trace.value("truncated", false) == true;
      traces.push_back(std::move(t));
    }
    for (const auto& o : proc.value("outer_ops", json::array())) {
      json& m = outer[o.value("op", "")];
      if (m.is_null()) m = {{"op", o.value("op", "")}, {"calls", 0L}, {"time_us", 0.0}};
      m["calls"] = m["calls"].get<long>() + o.value("calls", 0L);
      m["time_us"] = m["time_us"].get<double>() + o.value("time_us", 0.0);
    }
  }
  if (processes == 0)
    throw std::runtime_error(
        "the command ran but no process imported torch with the capture library loaded");
  json list = json::array(), outer_list = json::array();
  double total = 0;
  long calls = 0;
  json by_key = json::object();  // op time per dispatch key: CPU wall and CUDA device time don't add
  std::map<std::string, long> index_of;  // flows name entries by their place in `list`
  for (auto& [k, e] : entries) {
    index_of[k] = static_cast<long>(list.size());
    if (e.contains("modules")) {  // the path most calls ran under
      std::string top;
      long top_calls = 0;
      for (const auto& [path, n] : e["modules"].items())
        if (n.get<long>() > top_calls) top = path, top_calls = n.get<long>();
      e["module"] = top;
    }
    total += e["time_us"].get<double>();
    calls += e["calls"].get<long>();
    const std::string key = e.value("dispatch_key", "CPU");
    by_key[key] = by_key.value(key, 0.0) + e["time_us"].get<double>();
    list.push_back(std::move(e));
  }
  for (auto& [_, o] : outer) outer_list.push_back(std::move(o));
  json flow_list = json::array(), produced_list = json::array();
  for (const auto& [k, n] : flows)
    flow_list.push_back({{"from", index_of[std::get<0>(k)]}, {"out", std::get<1>(k)},
                         {"to", index_of[std::get<2>(k)]}, {"in", std::get<3>(k)}, {"calls", n}});
  for (const auto& [k, n] : produced)
    produced_list.push_back({{"entry", index_of[k.first]}, {"out", k.second}, {"tensors", n}});
  json trace_list = json::array();
  for (const Trace& t : traces) {
    json rs = json::array();
    for (const Read& r : t.reads)
      rs.push_back({r.from_call, index_of[r.from], r.out, r.to_call, index_of[r.to], r.in});
    trace_list.push_back({{"reads", std::move(rs)}, {"open", t.open}, {"truncated", t.truncated}});
  }
  return {{"status", "ok"}, {"timing", timing},     {"processes", processes},
          {"time_us", total}, {"calls", calls},     {"entries", list},
          {"time_us_by_dispatch_key", by_key},
          {"outer_ops", outer_list}, {"flows", flow_list}, {"produced", produced_list}, {"traces", trace_list},
          {"module_code", module_code}};
}

json run_capture(BuildContext& ctx, const ModelSpec& m, const RuntimeLibs& rt) {
  const fs::path dir = ctx.manifest.store / "tmp" /
                       ("capture-" + m.name + "-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  Command c = model_command(m, rt, {rt.capture_lib.string()});
  c.env["FORGE_CAPTURE_DIR"] = dir.string();
  c.env["FORGE_CAPTURE_SAMPLES"] = std::to_string(ctx.manifest.capture.samples_per_target);
  c.env["FORGE_CAPTURE_MAX_BYTES"] =
      std::to_string(static_cast<long long>(ctx.manifest.capture.max_input_mb_per_model * 1e6));
  c.timeout_seconds = ctx.manifest.capture.timeout_seconds;
  CommandResult r = ctx.runner.run(c);
  std::string log = r.out + r.err;
  json record;
  if (!r.ok()) {
    record = failed_record("`" + (m.run.empty() ? m.torchscript.string() : m.run) + "` " +
                               r.describe(),
                           tail(r.err.empty() ? r.out : r.err));
  } else {
    try {
      record = ingest_capture_dir(ctx.builder.store(), dir,
                                  ctx.manifest.capture.samples_per_target);
    } catch (const std::exception& e) {
      record = failed_record(e.what(), tail(log));
    }
  }
  record["log"] = ctx.builder.store().put_object(log);
  record["seconds"] = r.seconds;
  fs::remove_all(dir, ec);
  return record;
}

}  // namespace

double bytes_moved(const json& args, const json& outputs) {
  double b = 0;
  for (const auto& a : args) b += tensor_bytes(a);
  for (const auto& o : outputs) b += tensor_bytes(o);
  return b;
}

std::string dispatch_key_of(const std::string& backend) {
  return backend == "cuda" ? "CUDA" : "CPU";
}

std::vector<Target> targets_from_capture(const std::string& model, const json& record,
                                         std::optional<double> ceiling,
                                         const std::string& backend) {
  std::vector<Target> out;
  for (const auto& e : record.value("entries", json::array())) {
    Target t;
    t.model = model;
    t.op = e.value("op", "");
    t.outer_op = e.value("outer_op", "");
    t.signature = e.value("signature", "");
    t.id = make_target_id(model, t.op, t.signature);
    t.calls = e.value("calls", 0L);
    t.time_us = e.value("time_us", 0.0);
    t.args = e.value("args", json::array());
    t.outputs = e.value("outputs", json::array());
    t.bytes = bytes_moved(t.args, t.outputs);
    if (ceiling && *ceiling > 0) t.floor_us = t.bytes / *ceiling * 1e6;
    t.sample_inputs = e.value("samples", json::array());
    t.samples = static_cast<int>(t.sample_inputs.size());
    if (auto why = inherent_reason(e, backend)) leave_out(t, why->reason, why->why);
    out.push_back(std::move(t));
  }
  return out;
}

void CaptureRule::apply(BuildContext& ctx) {
  auto rt = ensure_runtime(ctx);
  std::optional<double> ceiling = copy_ceiling(ctx);
  for (const auto& m : ctx.manifest.models) {
    if (!rt) {
      ctx.models[m.name] = {{"status", "not captured"},
                            {"reason", "the capture library is not built"}};
      continue;
    }
    StepSpec spec;
    spec.kind = "capture";
    spec.label = m.name;
    spec.name = "capture/" + m.name;
    spec.inputs = {{"command", m.run.empty() ? "torchscript" : m.run},
                   // Relative to forge.yaml: clones in other places share through a cache.
                   {"workdir", fs::relative(m.workdir, ctx.manifest.dir).generic_string()},
                   {"files", named_files_digest(m)},
                   {"env", model_env_digest(m, /*threads=*/false)},
                   {"toolchain", ctx.toolchain.fingerprint()},
                   {"device", ctx.device.fingerprint()},
                   {"capture_lib", rt->digest},
                   // the Python side: module hooks and their code digests
                   {"autoload", tree_digest(fs::path(FORGE_SOURCE_DIR) / "runtime" / "autoload")},
                   {"samples", std::to_string(ctx.manifest.capture.samples_per_target)},
                   {"max_input_mb", std::to_string(ctx.manifest.capture.max_input_mb_per_model)}};
    spec.run = [&ctx, &m, rt] { return run_capture(ctx, m, *rt); };
    auto outcome = ctx.step(spec, m.name);
    if (!outcome) {
      ctx.models[m.name] = {{"status", "not captured"}, {"reason", "not captured yet"}};
      continue;
    }
    const json& rec = outcome->record;
    if (!record_ok(rec)) {
      ctx.models[m.name] = {{"status", "failed"},
                            {"reason", rec.value("reason", "")},
                            {"detail", rec.value("detail", "")}};
      continue;
    }
    std::vector<Target> all = targets_from_capture(m.name, rec, ceiling, ctx.device.backend);
    const int signatures = static_cast<int>(all.size());
    const double op_time = rec.value("time_us_by_dispatch_key", json::object())
                               .value(dispatch_key_of(ctx.device.backend), 0.0);
    // Host ops' wall time is no share of the device's op time: they are listed
    // after the ranked ones, without a share.
    std::vector<Target> ranked, left_out, host;
    for (auto& t : all) (t.selection == Selection::HostOp ? host : ranked).push_back(std::move(t));
    std::vector<Target> chosen = select_targets(std::move(ranked), ctx.manifest.targets, op_time, &left_out);
    for (auto& t : host) left_out.push_back(std::move(t));
    json reasons = json::object();  // {reason: signatures}
    for (const auto& t : left_out) reasons[selection_name(t.selection)] = reasons.value(selection_name(t.selection), 0) + 1;
    ctx.models[m.name] = {{"status", "ok"},
                          {"cached", outcome->cached},
                          {"timing", rec.value("timing", "")},
                          {"processes", rec.value("processes", 0)},
                          {"calls", rec.value("calls", 0L)},
                          {"time_us", op_time},
                          {"signatures", signatures},
                          {"selected", static_cast<int>(chosen.size())},
                          {"not_selected", reasons},
                          {"copy_ceiling_gbps", ceiling ? json(*ceiling / 1e9) : json(nullptr)}};
    for (const Chain& c : find_chains(rec, ctx.device.backend)) {
      json cj = chain_json(c, m.name, op_time);
      // The digest of the module's forward: a packaged chain replaces that
      // forward only where the class's code is the same (runtime/autoload/forge_autoload/modules.py).
      if (c.whole_forward) {
        const std::string cls = c.module.substr(c.module.rfind('/') + 1);
        const json code = rec.value("module_code", json::object()).value(cls, json(""));
        cj["module_code"] = code.is_string() && !code.get<std::string>().empty() ? code : json(nullptr);
      }
      std::string why;
      if (auto t = chain_target(m.name, rec, c, &why)) {
        cj["id"] = t->id;
        ctx.chain_targets.push_back(std::move(*t));
      } else {
        cj["id"] = nullptr;
        cj["why"] = "not a target: " + why;
      }
      ctx.chains.push_back(std::move(cj));
    }
    for (auto& t : chosen) ctx.targets.push_back(std::move(t));
    for (auto& t : left_out) ctx.not_selected.push_back(std::move(t));
  }
}

}  // namespace forge
