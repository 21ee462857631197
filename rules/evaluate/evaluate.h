// Evaluating candidate kernels against a captured target, end to end:
//   static check (rules/evaluate/static_check.h)  -> rejected "static_check"
//   compile, one batch (rules/evaluate/compile.h)  -> rejected "compile_error"
//   samples out of the store to raw files, the .so materialized
//   verify + bench in the worker, through an Executor (rules/evaluate/executor.h)
// giving one evaluation record per candidate.
//
// Each worker evaluation is a step (kind "evaluate") keyed on the candidate's
// .so digest, the target (op, signature, argument records, sample digests),
// the family file's digest, the executor's fingerprint (worker build), the
// device and the evaluation settings; verdicts (accepted or rejected) are
// cached, "error" (could not evaluate) is not.
//
// Record (what `forge try --json` prints):
//   {"candidate": name, "target": id, "verdict": "accepted"|"rejected"|"error",
//    "reason": ..., "detail": one line,
//    "static": [{"rule", "line", "text", "rationale"}],
//    "compile": {"ok", "cached", "seconds", "so", "log"} (after the static check),
//    "verify": {...}, "bench": {...} (the worker's, docs/WORKER.md),
//    "evaluation": {"cached", "seconds"},
//    "baseline": {"captured_us": per-call time seen during capture,
//                 "compile_us": null (torch.compile: not measured yet)}}
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "engine/build.h"
#include "rules/evaluate/compile.h"
#include "rules/evaluate/executor.h"
#include "rules/evaluate/family.h"
#include "rules/capture/runtime_build.h"

namespace forge {

struct EvalSettings {
  uint64_t seed = 1234;
  nlohmann::json bench = {{"warmup", 5}, {"reps", 30}, {"min_seconds", 0.2}, {"max_seconds", 10}};
  // Per candidate, in the worker: set (--timeout), this limit; unset, the
  // limit grows with the bytes the target's call moves (rules/evaluate/timeout.h).
  std::optional<double> timeout_seconds;
};

// The benchmark settings the worker gets for ctx's backend.
nlohmann::json bench_settings(const BuildContext& ctx, const EvalSettings& settings);

// One record per source, in order. Candidates compile in one batch; the
// worker evaluates them one after another.
std::vector<nlohmann::json> evaluate_candidates(BuildContext& ctx, Executor& executor,
                                                const Target& target, const Family& family,
                                                const std::vector<CandidateSource>& sources,
                                                const EvalSettings& settings = {});

// The digest of the target's captured samples (an evaluation step's input).
std::string samples_digest(const Target& target);

// "mean.dim" -> {"mean", "dim"}; "_softmax" -> {"_softmax", ""}.
std::pair<std::string, std::string> split_op(const std::string& op);

// The target's captured samples as the worker reads them: each tensor written
// from the store to <store>/build/objects/<digest>.bin. Throws forge::Error
// naming a sample that is missing from the store.
nlohmann::json materialize_samples(BuildContext& ctx, const Target& target);

}  // namespace forge
