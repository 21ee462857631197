// One build: the manifest, the probed environment, and the rules (stages) that
// turn it into targets, kernels and a package. Rules plug in behind Rule; each
// adds its steps through BuildContext::step(), which runs them through the
// action cache, or, in dry mode (status, explain), only looks them up.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/builder.h"
#include "engine/environment.h"
#include "engine/manifest.h"
#include "engine/target.h"

namespace forge {

struct BuildOptions {
  bool dry_run = false;        // look up, never run (status, explain)
  std::optional<int> budget;   // --budget N overrides budget.iterations
  std::optional<std::string> executor;  // --executor local|slurm overrides forge.yaml's
};

struct StepRecord {
  std::string model;  // "" for shared steps
  StepSpec spec;      // without run/validate callbacks
  Explanation explanation;
};

struct BuildContext {
  const Manifest& manifest;
  Builder& builder;
  CommandRunner& runner;
  Toolchain toolchain;
  DeviceInfo device;
  BuildOptions options;

  std::vector<Target> targets;  // selected targets of every model, in rank order
  // Every other captured op of every model, ranked, each with the reason it is
  // not selected (Target::selection, why); host ops last.
  std::vector<Target> not_selected;
  std::map<std::string, nlohmann::json> models;  // per model summary for reports
  // Chains of ops worth fusing, every model's (rules/capture/chains.h, chain_json).
  nlohmann::json chains = nlohmann::json::array();
  // Each chain that can be a target, as one (rules/capture/chain_target.h):
  // `forge try` verifies kernels for them; the search does not propose yet.
  std::vector<Target> chain_targets;
  std::vector<StepRecord> dry_steps;  // in dry mode: every step looked up, explained
  bool failed = false;                // some step failed (exit code 1)
  bool stopped = false;               // interrupted (util/interrupt.h): the rest only reported
  std::vector<std::string> notes;     // lines for the report ("search: not built yet")
  nlohmann::json history;             // the history stage's summary; null when it did not run
  nlohmann::json package;             // the package stage's summary; null when it did not run
  nlohmann::json llm;                 // the model's token/cost ledger for the build; null without one
  // This build's own searches, wall clock: {target id: {evaluations, seconds,
  // compile_wait_seconds (with compile-ahead: the part spent waiting on compile
  // batches)}} for each target that evaluated candidates (journal replays
  // excluded); null when none did. Candidates per minute come from here.
  nlohmann::json search;
  // When the build started, once the store was locked and the toolchain and
  // device probed (budget.build_seconds counts from here).
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  // Runs `spec` through the cache (or looks it up in dry mode; then nullopt
  // when it would have to run). Marks the build failed when the step fails.
  std::optional<StepOutcome> step(const StepSpec& spec, const std::string& model = "");
};

class Rule {
 public:
  virtual ~Rule() = default;
  virtual std::string name() const = 0;
  virtual void apply(BuildContext& ctx) = 0;
};

// Runs each rule in order. Returns the build's JSON report (the shape of
// `forge build --json`).
nlohmann::json run_build(BuildContext& ctx, const std::vector<std::unique_ptr<Rule>>& rules);

nlohmann::json targets_json(const std::vector<Target>& targets);

}  // namespace forge
