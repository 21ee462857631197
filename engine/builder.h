// Builder runs steps through the action cache: a step whose key is already in
// the store is not run; its recorded result is returned. It also remembers, per
// step name, the inputs of the last run so `forge explain` can say which input
// changed. Thread-safe: steps of different targets may run concurrently.
#pragma once

#include <atomic>
#include <map>
#include <optional>
#include <string>

#include "engine/progress.h"
#include "engine/step.h"
#include "store/store.h"

namespace forge {

struct StepOutcome {
  nlohmann::json record;
  bool cached = false;
};

// Why a step would (not) run, for `forge explain`.
struct Explanation {
  bool up_to_date = false;
  std::string key;
  // Human lines: "input 'script' changed (a1b2c3 -> d4e5f6)", "never built", ...
  std::vector<std::string> reasons;
};

class Builder {
 public:
  Builder(store::Store& store, Progress& progress) : m_store(store), m_progress(progress) {}

  // Runs the step unless cached. Exceptions from spec.run become failed records
  // (reason = the message) so one broken step never takes the build down.
  StepOutcome run(const StepSpec& spec);

  // The cached record, if any, without running anything (status, explain).
  std::optional<nlohmann::json> lookup(const StepSpec& spec);

  // Keeps `record`, a result another step's run produced, as this step's
  // result too, where it holds for this step's inputs as well (a step keyed
  // more broadly than the one that ran). Runs nothing; not counted as run.
  void keep(const StepSpec& spec, const nlohmann::json& record);

  Explanation explain(const StepSpec& spec);

  int steps_run() const { return m_run; }
  int steps_cached() const { return m_cached; }
  int steps_failed() const { return m_failed; }
  Progress& progress() { return m_progress; }
  store::Store& store() { return m_store; }

 private:
  void remember_inputs(const StepSpec& spec, const std::string& key);

  store::Store& m_store;
  Progress& m_progress;
  std::atomic<int> m_run{0}, m_cached{0}, m_failed{0};
};

}  // namespace forge
