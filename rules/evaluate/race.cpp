#include "rules/evaluate/race.h"

#include "util/hash.h"
#include "rules/evaluate/timeout.h"

namespace forge {
using nlohmann::json;

namespace {

// Tip first, then challenger twice, tip twice, ...: every pair of rounds has
// one of each, and a linear drift costs both the same.
bool tip_runs(int round) { return round % 4 == 0 || round % 4 == 3; }

std::string so_of(const json& rec) {
  const json so = rec.value("compile", json::object()).value("so", json());
  return so.is_string() ? so.get<std::string>() : "";
}

}  // namespace

std::optional<json> race_kernels(BuildContext& ctx, Executor& executor, const Target& target,
                                 const Family& family, const Contender& tip, const Contender& challenger,
                                 const RaceRule& rule, const EvalSettings& settings) {
  const std::string tip_so = so_of(tip.record), challenger_so = so_of(challenger.record);
  if (tip_so.empty() || challenger_so.empty()) return std::nullopt;
  const json bench = bench_settings(ctx, settings);
  StepSpec spec;
  spec.kind = "race";
  spec.label = target.id + " " + challenger.record.value("candidate", "") + " vs " + tip.record.value("candidate", "");
  spec.inputs = {{"tip", tip_so},
                 {"challenger", challenger_so},
                 {"target", target.op + "\n" + target.signature},
                 {"args", sha256_hex(target.args.dump())},
                 {"samples", samples_digest(target)},
                 {"family", family.digest},
                 {"executor", executor.fingerprint()},
                 {"device", ctx.device.fingerprint()},
                 {"settings", sha256_hex(json{{"seed", settings.seed}, {"bench", bench}}.dump())},
                 {"rule", rule.to_json().dump()}};
  spec.run = [&]() -> json {
    store::Store& store = ctx.builder.store();
    const auto tip_path = materialize_object(store, tip_so, materialize_dir(ctx), ".so");
    const auto challenger_path = materialize_object(store, challenger_so, materialize_dir(ctx), ".so");
    if (tip_path.empty() || challenger_path.empty())
      return failed_record("race_failed", "a kernel of the race is missing from the store");
    const json samples = materialize_samples(ctx, target);
    const auto [op, overload] = split_op(target.op);
    json order = json::array(), tip_ratios = json::array(), challenger_ratios = json::array();
    std::vector<double> t, c;
    double seconds = 0;
    for (int round = 0; round < 2 * rule.rounds; ++round) {
      const bool is_tip = tip_runs(round);
      EvalRequest req;
      req.op = op;
      req.overload = overload;
      req.args = target.args;
      req.samples = samples;
      req.family = family.spec;
      req.candidate = is_tip ? tip_path : challenger_path;
      req.seed = settings.seed + 7919 * static_cast<uint64_t>(round + 1);
      req.bench = bench;
      req.timeout_seconds = eval_timeout::limit(settings.timeout_seconds, target.bytes);
      req.mode = "race";
      req.chain = target.chain;
      EvalResult r = executor.evaluate(req);
      seconds += r.seconds;
      if (r.verdict == "error") return failed_record(r.reason, r.detail);
      order.push_back(is_tip ? "tip" : "challenger");
      const double k = r.bench.is_object() ? r.bench.value("candidate_us", json::object()).value("median", 0.0) : 0;
      const double s = r.bench.is_object() ? r.bench.value("eager_us", json::object()).value("median", 0.0) : 0;
      if (r.verdict != "accepted" || k <= 0 || s <= 0) {
        json out{{"status", "ok"},         {"rule", rule.to_json()}, {"order", order},
                 {"challenger_wins", !is_tip}, {"seconds", seconds},
                 {"why", std::string(is_tip ? "the tip" : "the challenger") + " was rejected in race round " +
                             std::to_string(round + 1) + ": " + r.reason + ": " + r.detail}};
        return out;
      }
      (is_tip ? t : c).push_back(k / s);
      (is_tip ? tip_ratios : challenger_ratios).push_back(k / s);
    }
    const RaceDecision d = decide_race(t, c, rule);
    return {{"status", "ok"},
            {"rule", rule.to_json()},
            {"order", order},
            {"tip_ratios", tip_ratios},
            {"challenger_ratios", challenger_ratios},
            {"challenger_wins", d.challenger_wins},
            {"effect", d.effect},
            {"p", d.p},
            {"u", d.u},
            {"why", d.why},
            {"seconds", seconds}};
  };
  StepOutcome outcome = ctx.builder.run(spec);
  if (!record_ok(outcome.record)) return std::nullopt;
  // The kernels by their evaluation records (the step is keyed on their .so
  // files, which two evaluations of one kernel share).
  json rec = outcome.record;
  rec["tip"] = tip.evaluation;
  rec["challenger"] = challenger.evaluation;
  rec["cached"] = outcome.cached;
  return rec;
}

}  // namespace forge
