// forge.yaml, parsed and validated. Every field is documented in
// forge.yaml.example; only `models: {NAME: {run: COMMAND}}` is required.
//
// Errors throw forge::ManifestError whose message is exactly
//   <file>:<LINE>:<COL>: <message>
//   <the source line>
//   <spaces>^
// (1-based line and column, in characters, of the offending key or value; a
// missing key points at its parent's key). Unknown keys add
// " (did you mean 'X'?)" when a known key is within edit distance 2, or
// " (it belongs under 'budget')" when the key is known elsewhere.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace forge {

struct ModelSpec {
  std::string name;
  // Exactly one of run / torchscript.
  std::string run;                    // shell command, run from `workdir`
  std::filesystem::path torchscript;  // TorchScript file (absolute after load)
  std::filesystem::path inputs;       // inputs file for torchscript (absolute)
  std::filesystem::path workdir;      // absolute; default: the manifest's folder
  std::map<std::string, std::string> env;  // extra environment for the run
  // A regular expression whose first group captures the model's own time
  // figure in its stdout (e.g. "([0-9.]+) ms/iter"); the end-to-end check
  // compares those instead of whole-command wall time. Empty: wall time.
  std::string latency;
  // Alternating pairs of timed runs (stock, forged) in the end-to-end check:
  // fewer for a model whose start-up is slow.
  int check_runs = 5;
  // The environment under which `run` runs the model under torch.compile
  // ({MODEL_COMPILE: '1'}; {} when it always does). Set: the end-to-end check
  // also times the compiled run with forge's routes into compiled graphs on
  // and off, and turns this model's routes off where they made it slower
  // (rules/package/verdict.h).
  std::optional<std::map<std::string, std::string>> compile_env;
};

struct TargetSelection {
  std::vector<std::string> ops;  // backend op names ("_softmax", "mean.dim"); empty = all
  int top = 8;                   // keep at most this many targets per model (0 = no limit)
  double min_share = 0.01;       // drop targets under this share of the model's op time
  std::optional<int> chains;     // chain targets searched per build; unset = as many as `top`; 0 = none
};

struct Budget {
  int iterations = 20;  // MCTS iterations per target
  double seconds = 0;   // wall-clock cap per target, 0 = none
  int parallel = 0;     // candidates compiled at once (rules/search/search.cpp), 0 = auto
  // Wall-clock cap on this build's searches, from the moment forge build
  // started: no evaluation starts after it, the package stage still runs
  // (a CI job's time limit); 0 = none. Not part of any step's key: the next
  // build continues the searches it cut.
  double build_seconds = 0;
};

struct DeviceSpec {
  std::string backend = "auto";  // auto | cuda | cpu
  std::string arch = "auto";     // auto | sm_90a | sm_80 ...
};

struct CaptureSpec {
  int samples_per_target = 2;          // calls per signature whose input values are saved
  double max_input_mb_per_model = 256;  // cap on saved input bytes per model
  double timeout_seconds = 1800;        // a run that takes longer is killed
};

struct LlmSpec {
  std::string provider;  // openai | anthropic | gemini | command
  std::string model;
  std::string base_url;
  std::string api_key_env;  // name of the environment variable, never the key
  std::string command;      // for provider: command
  std::optional<double> price_in, price_out;  // USD per million tokens; unset = no cost
  int variants = 3;              // model variants asked for under each tree node
  int max_tokens = 8192;         // reply length cap per request
  std::optional<double> temperature;  // unset = the provider's default
  double timeout_seconds = 300;  // per request (connect: 10 s), before retries
  int concurrency = 4;           // requests in flight at once
  bool chains = false;           // also propose for chain targets (several ops as one kernel)
};

struct ProposerSpec {
  bool strategies = true;       // the built-in strategy library
  std::optional<LlmSpec> llm;   // absent = no model endpoint
};

struct HistorySpec {
  std::string ref = "refs/heads/forge/kernels";
  std::filesystem::path repo;  // empty = the git repository holding forge.yaml
};

// Evaluations as Slurm jobs (executor: slurm; rules/cluster/slurm_executor.h).
struct SlurmSpec {
  std::string partition;   // "" = the cluster's default
  std::string account;     // "" = none
  std::string time_limit;  // per job, Slurm's format ("30", "1:00:00"); "" = from the timeouts
  std::string gres;        // e.g. "gpu:1"; "" = none
  int max_parallel = 4;    // evaluations at once (the job array's %K)
  int retries = 2;         // resubmissions of a job Slurm killed, pre-empted or timed out
  double poll_seconds = 2;
};

// A shared HTTP cache in front of the store (store/http_cache.h); the
// FORGE_CACHE_URL environment variable overrides `url`.
struct CacheSpec {
  std::string url;               // e.g. http://cache:8080/forge; "" = none
  double timeout_seconds = 5;    // per request (connect: 1 s); a failure turns it off for the build
};

struct Manifest {
  std::filesystem::path path;  // forge.yaml (absolute)
  std::filesystem::path dir;   // its folder
  std::vector<ModelSpec> models;  // in file order
  TargetSelection targets;
  Budget budget;
  DeviceSpec device;
  CaptureSpec capture;
  ProposerSpec proposer;
  HistorySpec history;
  std::filesystem::path store;  // absolute; default dir/.forge
  std::string executor = "local";
  SlurmSpec slurm;
  CacheSpec cache;
};

// Reads and validates a manifest file. Throws ManifestError (format above), or
// forge::Error when the file cannot be read.
Manifest load_manifest(const std::filesystem::path& path);

// Same, from text (for tests). `path` is shown in messages as given, and
// relative paths in the manifest are resolved against its folder.
Manifest parse_manifest(const std::string& text, const std::filesystem::path& path);

}  // namespace forge
