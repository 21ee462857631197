#include "rules/evaluate/evaluate.h"

#include "rules/capture/ceiling.h"
#include "rules/evaluate/timeout.h"
#include "util/error.h"
#include "util/hash.h"

namespace forge {
using nlohmann::json;

namespace {

json static_json(const std::vector<StaticViolation>& violations) {
  json list = json::array();
  for (const auto& v : violations)
    list.push_back(
        {{"rule", v.rule}, {"line", v.line}, {"text", v.text}, {"rationale", v.rationale}});
  return list;
}

// A partial sample's fields (docs/CAPTURE.md, "Samples"), passed on to the
// worker with the file.
constexpr const char* kPartialSampleKeys[] = {"sampling", "stored_numel", "min", "max"};


}  // namespace

std::string samples_digest(const Target& target) {
  Hasher h;
  for (const auto& s : target.sample_inputs)
    for (const auto& e : sample_entries(s)) {
      h.add("arg", e.is_object() ? e.value("digest", "") : "");
      if (!e.is_object()) continue;
      for (const char* key : kPartialSampleKeys)
        if (e.contains(key)) h.add(key, e[key].dump());
    }
  return h.hex();
}

namespace {

json baseline(const Target& t) {
  // Per call as the capture timed it; null when the capture has no time for it.
  return {{"captured_us", t.calls > 0 && t.time_us > 0 ? json(t.time_us / t.calls) : json(nullptr)},
          {"compile_us", nullptr}};
}

}  // namespace

std::pair<std::string, std::string> split_op(const std::string& op) {
  auto dot = op.find('.');
  if (dot == std::string::npos) return {op, ""};
  return {op.substr(0, dot), op.substr(dot + 1)};
}

json materialize_samples(BuildContext& ctx, const Target& target) {
  json samples = json::array();
  for (const auto& s : target.sample_inputs) {
    json inputs = json::array();
    for (const auto& e : sample_entries(s)) {
      const std::string digest = e.is_object() ? e.value("digest", "") : "";
      if (digest.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      auto path = materialize_object(ctx.builder.store(), digest, materialize_dir(ctx), ".bin");
      if (path.empty())
        throw Error("captured sample " + digest.substr(0, 12) + " of " + target.id +
                    " is missing from the store: run `forge capture` again");
      json in = {{"file", path.string()}};
      for (const char* key : kPartialSampleKeys)
        if (e.contains(key)) in[key] = e[key];
      inputs.push_back(std::move(in));
    }
    samples.push_back({{"inputs", inputs}});
  }
  return samples;
}

json bench_settings(const BuildContext& ctx, const EvalSettings& settings) {
  // CPU candidates compute on the calling thread, so the stock kernel is timed
  // on one intra-op thread too: a per-core comparison. With torch's default
  // threads a small op's time is dominated by waking the pool (bimodal, up to
  // milliseconds on 2-vCPU VMs), which made acceptance a coin toss in CI.
  json bench = settings.bench;
  if (ctx.device.backend == "cpu" && !bench.contains("threads")) bench["threads"] = 1;
  return bench;
}

std::vector<json> evaluate_candidates(BuildContext& ctx, Executor& executor, const Target& target,
                                      const Family& family,
                                      const std::vector<CandidateSource>& sources,
                                      const EvalSettings& settings) {
  std::vector<json> records(sources.size());
  std::vector<CandidateSource> to_compile;
  std::vector<size_t> compiled_index;
  for (size_t i = 0; i < sources.size(); ++i) {
    json& rec = records[i];
    rec = {{"candidate", sources[i].name},
           {"source", ctx.builder.store().put_object(sources[i].text)},
           {"target", target.id},
           {"baseline", baseline(target)}};
    auto violations = static_check(sources[i].text, sources[i].lang);
    rec["static"] = static_json(violations);
    if (!violations.empty()) {
      rec["verdict"] = "rejected";
      rec["reason"] = "static_check";
      rec["detail"] =
          violations.front().describe() +
          (violations.size() > 1 ? " (and " + std::to_string(violations.size() - 1) + " more)"
                                 : "");
      continue;
    }
    to_compile.push_back(sources[i]);
    compiled_index.push_back(i);
  }
  std::vector<CompileResult> compiled = compile_candidates(ctx, to_compile);

  json samples;  // materialized on first use
  const std::string op = split_op(target.op).first, overload = split_op(target.op).second;
  const json bench = bench_settings(ctx, settings);
  const double timeout = eval_timeout::limit(settings.timeout_seconds, target.bytes);
  const json settings_json = {{"seed", settings.seed},
                              {"bench", bench},
                              {"timeout_seconds", timeout}};
  for (size_t k = 0; k < compiled.size(); ++k) {
    json& rec = records[compiled_index[k]];
    const CompileResult& c = compiled[k];
    rec["compile"] = {{"ok", c.ok},
                      {"cached", c.cached},
                      {"seconds", c.seconds},
                      {"so", c.so_digest.empty() ? json(nullptr) : json(c.so_digest)},
                      {"log", c.log}};
    if (!c.ok) {
      // A compiler's "no" is the candidate's; a compile that could not run is not.
      rec["verdict"] = c.reason == "compile_error" ? "rejected" : "error";
      rec["reason"] = c.reason;
      rec["detail"] = c.detail;
      continue;
    }

    StepSpec spec;
    spec.kind = "evaluate";
    spec.label = target.id + " " + sources[compiled_index[k]].name;
    spec.inputs = {{"candidate", c.so_digest},
                   {"target", target.op + "\n" + target.signature},
                   {"args", sha256_hex(target.args.dump())},
                   {"samples", samples_digest(target)},
                   {"family", family.digest},
                   {"executor", executor.fingerprint()},
                   {"device", ctx.device.fingerprint()},
                   {"settings", sha256_hex(settings_json.dump())}};
    spec.run = [&, so_path = c.so_path]() -> json {
      if (samples.is_null()) samples = materialize_samples(ctx, target);
      EvalRequest req;
      req.op = op;
      req.overload = overload;
      req.args = target.args;
      req.samples = samples;
      req.family = family.spec;
      req.candidate = so_path;
      req.seed = settings.seed;
      req.bench = bench;
      req.timeout_seconds = timeout;
      req.chain = target.chain;
      EvalResult r = executor.evaluate(req);
      if (r.verdict == "error") return failed_record(r.reason, r.detail);
      json out{{"status", "ok"},      {"verdict", r.verdict}, {"reason", r.reason},
               {"detail", r.detail},  {"verify", r.verify},   {"bench", r.bench},
               {"seconds", r.seconds}};
      if (r.reply.is_object() && r.reply.contains("notes")) out["notes"] = r.reply["notes"];
      return out;
    };
    std::optional<StepOutcome> outcome;
    if (ctx.options.dry_run) {
      outcome = ctx.step(spec);
    } else {
      try {
        // Not ctx.step(): a rejected candidate is a result, not a failed build.
        outcome = ctx.builder.run(spec);
      } catch (const std::exception& e) {
        outcome = StepOutcome{failed_record("evaluation_failed", e.what()), false};
      }
    }
    if (!outcome) {
      rec["verdict"] = "error";
      rec["reason"] = "not_evaluated";
      rec["detail"] = "not evaluated yet";
      continue;
    }
    const json& r = outcome->record;
    if (!record_ok(r)) {
      rec["verdict"] = "error";
      rec["reason"] = r.value("reason", "evaluation_failed");
      rec["detail"] = r.value("detail", "");
      continue;
    }
    for (const char* key : {"verdict", "reason", "detail", "verify", "bench", "notes"})
      if (r.contains(key)) rec[key] = r[key];
    rec["evaluation"] = {{"cached", outcome->cached}, {"seconds", r.value("seconds", 0.0)}};
  }
  return records;
}

}  // namespace forge
