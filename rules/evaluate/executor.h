// Where candidates are evaluated. An Executor takes one evaluation request (a
// compiled candidate, the op's captured arguments and samples, the family's
// verification settings) and returns a verdict. The local executor owns one
// forge_worker child on this machine (rules/evaluate/worker_client.h); a cluster
// executor can ship the same requests elsewhere later.
//
// Verdicts: "accepted" / "rejected" are about the candidate (cacheable);
// "error" means it could not be evaluated (the worker did not start, forge sent
// a request the worker refused) and says nothing about the candidate.
// Rejection reasons are the worker's (docs/WORKER.md) plus the executor's own:
// "timeout", "crashed (signal N: name)" / "crashed (exit code N)",
// "worker_protocol" (a garbled reply line).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace forge {

struct EvalRequest {
  std::string op;        // backend op without overload: "_softmax", "mean"
  std::string overload;  // "" or "dim"
  nlohmann::json args;   // the capture's argument records
  // One entry per captured call: {"inputs": [{"file": "/abs/raw"} | null, ...]}.
  nlohmann::json samples = nlohmann::json::array();
  nlohmann::json family;            // targets/<family>/family.yaml as JSON
  std::filesystem::path candidate;  // the compiled .so
  uint64_t seed = 1234;
  nlohmann::json bench = {{"warmup", 5}, {"reps", 30}, {"min_seconds", 0.2}, {"max_seconds", 10}};
  double timeout_seconds = 60;  // for the whole request; then the worker is killed
  // "evaluate", or "race": first case only, then the benchmark (docs/WORKER.md).
  std::string mode = "evaluate";
  // A chain target's definition (Target::chain): the worker registers its op.
  nlohmann::json chain;

  // The worker's "evaluate" request (docs/WORKER.md), without "id".
  nlohmann::json to_json() const;
};

struct EvalResult {
  std::string verdict;  // accepted | rejected | error
  std::string reason;
  std::string detail;     // one line
  nlohmann::json verify;  // the worker's verification summary (null when absent)
  nlohmann::json bench;   // the worker's benchmark (null unless accepted)
  nlohmann::json reply;   // the raw reply, when there was one
  double seconds = 0;     // wall time of the request

  bool accepted() const { return verdict == "accepted"; }
};

class Executor {
 public:
  virtual ~Executor() = default;
  // What evaluates (the worker build and its settings), for step keys.
  virtual std::string fingerprint() const = 0;
  virtual EvalResult evaluate(const EvalRequest& request) = 0;
  // Several requests, one result each, in order. This default evaluates them
  // one after another; a cluster executor runs them at once (as a job array).
  virtual std::vector<EvalResult> evaluate_batch(const std::vector<EvalRequest>& requests) {
    std::vector<EvalResult> out;
    for (const auto& r : requests) out.push_back(evaluate(r));
    return out;
  }
  // The worker's hello ({} before the first evaluation).
  virtual nlohmann::json worker_info() const = 0;
};

struct LocalExecutorOptions {
  std::filesystem::path worker;   // forge_worker
  std::vector<std::string> args;  // e.g. {"--backend", "cpu", "--ceiling", "1.2e10"}
  std::map<std::string, std::string> env;
  std::filesystem::path log;  // the worker's stderr, appended
  std::string fingerprint;    // of the worker build (RuntimeLibs::worker_digest)
  double start_timeout_seconds = 300;
  // A rejected candidate ran code that may have scribbled over the worker's
  // memory beyond what its guards see; a fresh worker keeps that from being
  // blamed on, or hiding, the next candidate.
  bool restart_after_rejection = true;
};

std::unique_ptr<Executor> make_local_executor(LocalExecutorOptions options);

// The EvalResult for a worker's reply line to an evaluate request (verdict,
// reason, detail, verify, bench; an "error" reply is verdict "error"
// "worker_error"; a reply without a verdict is rejected "worker_protocol").
// `restart` is set when the worker must not serve another request after it.
EvalResult eval_result_from_reply(const nlohmann::json& reply, bool* restart = nullptr);

}  // namespace forge
