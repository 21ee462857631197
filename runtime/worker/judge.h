// The judge's pieces (docs/WORKER.md): a candidate in its runner with the
// exchange arena (session.cpp), the verification cases and their named checks
// (verify.cpp), the timed calls (benchmark.cpp). evaluate.cpp puts them in
// order. Torch-linked; internal to the worker.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "device.h"
#include "evaluator.h"
#include "memory_plan.h"
#include "op_args.h"
#include "runner_client.h"

namespace forge::worker {

// A failed check: the reply's reason and detail.
struct Failure {
  std::string reason;
  std::string detail;
};

// One set of candidate-visible buffers (all in the arena) bound to a call.
struct CallSet {
  std::vector<at::Tensor> inputs;  // tensor arguments in schema order (undefined: None)
  std::vector<Buffer> outputs;
  Buffer workspace;
  std::vector<forge_tensor> in_desc, out_desc;
  std::vector<forge_scalar> scalars;
};

// What one call of the candidate gave: the runner's reply (the candidate's
// word) and the judge's own clock, or the runner's end.
struct CallResult {
  std::optional<Failure> gone;
  runner::Reply reply{};
  double round_trip_us = 0;
};

// A candidate loaded in its runner, the arena it shares with the judge, and
// the judge's stream (CUDA) that must be idle before the runner reads.
class Session {
 public:
  Session(Runner& runner, Arena& arena, Device& judge_device, void* judge_stream, double call_timeout_s,
          int threads_after_load)
      : m_runner(runner),
        m_arena(arena),
        m_dev(judge_device),
        m_stream(judge_stream),
        m_timeout(call_timeout_s),
        m_threads(threads_after_load) {}

  // Binds `cs` to the case's inputs and fresh outputs shaped like `ref`, and
  // asks the candidate for its workspace.
  std::optional<Failure> bind(CallSet& cs, const Case& c, const std::vector<at::Tensor>& ref, bool guarded);
  // One call: Call, Nop or Graph; `timed`: the runner times it.
  CallResult call(const CallSet& cs, runner::Cmd cmd, bool timed);
  // The checks every call gets: the runner alive, no exception, no device
  // error, no thread left behind, the call's descriptors unchanged. A nonzero
  // return is not checked here: *declined says so.
  std::optional<Failure> check(const CallResult& r, const std::string& where, bool* declined) const;

  // The concurrency check (verify_threads.cpp): binds `cs` to the runner's
  // call slot `slot`, then calls slots [0, n) from n threads at once.
  CallResult stage(const CallSet& cs, int slot);
  CallResult together(int n);
  // Ends the runner's call threads; later calls are checked against the
  // thread count that leaves.
  std::optional<Failure> end_threads();
  bool runner_alive() const { return m_runner.alive(); }

 private:
  void fill_request(runner::Request& q, const CallSet& cs) const;
  CallResult call_request(runner::Request& q);  // send, wait, the runner's end as `gone`
  Runner& m_runner;
  Arena& m_arena;
  Device& m_dev;
  void* m_stream;
  double m_timeout;
  int m_threads;
};

// Where an evaluation's time goes (the reply's verify.phase_seconds): each
// phase's seconds, summed over cases. On CUDA the judge's queued work lands
// in whichever phase synchronizes next, unless FORGE_WORKER_PHASE_SYNC=1
// makes every phase end with a device synchronize (a diagnostic: slower).
class Phases {
 public:
  Phases(Device& dev, void* stream);
  // Ends the running phase (if any) and starts `name`; nullptr: none runs.
  void enter(const char* name);
  const char* current() const { return m_name; }
  json record() const;

 private:
  Device& m_dev;
  void* m_stream;
  bool m_sync;
  const char* m_name = nullptr;
  std::chrono::steady_clock::time_point m_t0;
  std::map<std::string, double> m_seconds;
};

// What verify and benchmark share for one evaluation.
struct Judge {
  const OpSpec& spec;
  const Family& family;
  const json& family_json;
  const json& samples;
  std::string samples_dir;
  Session& session;
  Device& dev;              // the judge's device (flushes, stock timing)
  void* stream;             // the judge's stream (CUDA), nullptr on the CPU
  std::vector<std::string>& notes;
  json& record;             // the reply's "verify"
  std::mt19937_64 rng;      // poison patterns, call order, content offsets
  std::optional<c10::ScalarType> in_dtype;  // the first floating input's dtype
  Phases phases;
  const MemoryPlan& memory;  // what the evaluation may hold (memory_plan.h)
  // Per output (index, sizes), from verified calls of a device output above
  // kHostCompareLimit with a float64 reference: (factor64 + 1) x stock's
  // largest error against float64 there (check_results). A verified kernel
  // is within the tolerance and factor64 x that error of float64 (compare.h's
  // second chance), stock within the error, so the kernel is within the
  // tolerance and this envelope of stock: the bound a later call of those
  // sizes is held to where no float64 evaluation fits the memory plan (the
  // timed and concurrent calls of a large output).
  std::map<std::pair<size_t, std::vector<int64_t>>, double> envelope64;

  uint64_t draw() { return rng(); }
};

// The named checks after a call (call_checks.cpp); each returns the Failure
// that rejects the candidate, or nullopt.
std::vector<at::Tensor> snapshot(const std::vector<Buffer>& bufs);
std::vector<at::Tensor> snapshot(const std::vector<at::Tensor>& ts);
// guards: nothing written outside the outputs, the workspace or the inputs.
std::optional<Failure> check_guards(const CallSet& cs, const Case& c, const std::string& where);
// inputs: the same bits as `before`.
std::optional<Failure> check_inputs(const CallSet& cs, const std::vector<at::Tensor>& before, const std::string& where);
// aliasing: no output overlaps an input.
std::optional<Failure> check_aliasing(const CallSet& cs, const std::string& where);
// late writes: where the outputs differ from an earlier snapshot, if anywhere.
std::optional<std::string> outputs_differ(const CallSet& cs, const std::vector<at::Tensor>& snap);
// Poisons the outputs and the workspace with patterns drawn for this call.
void poison_call(Judge& j, CallSet& cs);

// The results check: every output matches the reference within the family's
// tolerance and, where ref64 is given, is no less accurate than stock. Where
// the family sets compare_float64, an element outside the tolerance of stock
// gets a second chance against the float64 output (compare.h): ref64's, or
// later64's when ref64 is empty (called at most once, only when needed).
std::optional<Failure> check_results(Judge& judge, const CallSet& cs, const std::vector<at::Tensor>& ref,
                                     const std::vector<at::Tensor>& ref64, const std::string& where,
                                     CompareStats& stats, json* accuracy,
                                     const std::function<std::vector<at::Tensor>()>& later64 = {});

// Runs every case; fills judge.record. nullopt when all passed.
std::optional<Failure> verify_cases(Judge& judge, const std::vector<CasePlan>& plans);

// threads: the captured case called from several threads at once, each call
// on its own content, gives every call its own result (verify_threads.cpp).
// Ends the runner's call threads, whatever the verdict.
std::optional<Failure> verify_concurrent_calls(Judge& judge, const CasePlan& plan);

// Times candidate and stock on fresh content per call, checking every timed
// call's outputs. Fills `out` (the reply's "bench").
std::optional<Failure> benchmark(Judge& judge, const CasePlan& plan, const json& request, double ceiling, json& out);

std::string one_line(std::string s);

}  // namespace forge::worker
