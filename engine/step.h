// A step is the unit of incremental work: it has named inputs whose values (or
// digests of them) form its key, and running it yields a JSON result record that
// the action cache keeps under that key. Steps never look at anything that is
// not in their inputs; that is what makes a cache hit safe.
//
// Record contract: an object with "status": "ok" | "failed", and for failures
// "reason" (one line) and optionally "detail". Outputs are referenced by object
// digest ("log": "<sha256>") or, for build trees outside the store, by path plus
// digest so validate() can check they are still there.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace forge {

struct StepSpec {
  std::string kind;   // "capture", "compile", ... (progress, explain, statistics)
  std::string label;  // what progress prints after the kind: "resnet50/_softmax/3fa2c1 #4"
  // Stable name of this step across builds (e.g. "capture/resnet50"): explain compares
  // the inputs recorded under it with the current ones.
  std::string name;
  // Named key parts, in a fixed order. Values are short strings or digests.
  std::vector<std::pair<std::string, std::string>> inputs;
  // Bumped when the step's code changes meaning; part of the key.
  int version = 1;
  // Cache failed results too (deterministic failures such as a compile error).
  bool cache_failures = false;

  std::function<nlohmann::json()> run;
  // Optional: a cached record is used only when this returns true (its outputs
  // outside the store still exist); otherwise the step reruns.
  std::function<bool(const nlohmann::json&)> validate;
};

// The action-cache key of a step: kind, version and every input, typed.
std::string step_key(const StepSpec& spec);

inline bool record_ok(const nlohmann::json& record) {
  return record.is_object() && record.value("status", "") == "ok";
}

inline nlohmann::json failed_record(const std::string& reason, const std::string& detail = "") {
  nlohmann::json r{{"status", "failed"}, {"reason", reason}};
  if (!detail.empty()) r["detail"] = detail;
  return r;
}

// The record of a step the build's interruption stopped or skipped (never kept).
inline nlohmann::json interrupted_record() {
  return failed_record("interrupted", "the build was interrupted; the next build runs this step");
}

}  // namespace forge
