// The concurrency check (docs/WORKER.md, "Calls from several threads"): the
// package's users call ops from several threads at once (data loaders,
// serving threads, inter-op parallelism), so a kernel keeping scratch memory,
// lazily built tables or counters in static storage without a lock is wrong
// there even when every call alone is right. The captured case is bound
// once per call thread (as many as the cores, 2..4), each copy with its own
// content, and the runner calls them
// all at once from its call threads, for a few rounds of fresh content; every
// call must give its own stock result.
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include <algorithm>
#include <chrono>
#include <thread>

#include "accuracy_hook.h"
#include "judge.h"

namespace forge::worker {
namespace {

// Rounds: at least kMinRounds, then more while under kMinSeconds (short
// kernels overlap for a few microseconds per round), at most kMaxRounds.
constexpr int kMinRounds = 4, kMaxRounds = 64;
constexpr double kMinSeconds = 0.3;

// Calls at once: no more than the cores, so every thread is running when the
// start barrier opens (a thread waiting for a core overlaps nothing).
int calls_at_once() {
  const unsigned cores = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp<unsigned>(cores, 2, runner::kMaxSlots));
}

std::optional<Failure> rounds(Judge& j, const CasePlan& plan) {
  Session& s = j.session;
  const int n = std::min(calls_at_once(), j.memory.thread_calls);  // as many as memory allows (memory_plan.h)
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::vector<Case> cases;
  std::vector<std::vector<at::Tensor>> refs(n), before(n);
  std::vector<CallSet> sets(n);
  for (int k = 0; k < n; ++k) cases.push_back(make_case(j.spec, plan, j.samples, j.samples_dir, j.family, true));
  const std::string on = "on case " + plan.name + " called from " + std::to_string(n) + " threads at once";
  int round = 0;
  for (; round < kMaxRounds && (round < kMinRounds || elapsed() < kMinSeconds); ++round) {
    for (int k = 0; k < n; ++k) {
      // Slot 0 keeps the case's own content in the first round; every other
      // call gets content of its own.
      if (round > 0 || k > 0) refill_in_place(cases[k], j.family, j.draw());
      refs[k] = call_stock(j.spec, cases[k].args, /*clone_inputs=*/true);
      if (round == 0)
        if (auto f = s.bind(sets[k], cases[k], refs[k], true)) return Failure{f->reason, f->detail + " " + on};
      poison_call(j, sets[k]);
      before[k] = snapshot(sets[k].inputs);
      bool dec = false;
      CallResult st = s.stage(sets[k], k);
      if (auto f = s.check(st, on, &dec)) return f;
    }
    CallResult r = s.together(n);
    const std::string where = on + " (round " + std::to_string(round + 1) + ")";
    bool dec = false;
    if (auto f = s.check(r, where, &dec)) return f;
    if (dec)
      return Failure{"declined", "forge_kernel returned " + std::to_string(r.reply.rc) + " " + where +
                                     ": a kernel must handle the signature it was captured with"};
    for (int k = 0; k < n; ++k) {
      const std::string at = where + ", call " + std::to_string(k + 1);
      if (auto f = check_guards(sets[k], cases[k], at)) return f;
      if (auto f = check_inputs(sets[k], before[k], at)) return f;
      CompareStats ignore;
      std::function<std::vector<at::Tensor>()> later64;  // as the timed calls' (benchmark.cpp)
      if (j.spec.changed.empty() && small_for_float64(refs[k]))
        later64 = [&] { return reference_float64(j.spec, cases[k].args); };
      if (auto f = check_results(j, sets[k], refs[k], {}, at, ignore, nullptr, later64))
        return Failure{"thread_unsafe", f->reason + ": " + f->detail +
                                            " (each call alone was right: state shared between calls without a lock?)"};
    }
  }
  j.record["threads"] = {{"calls_at_once", n}, {"rounds", round}, {"case", plan.name}, {"seconds", elapsed()}};
  return std::nullopt;
}

}  // namespace

std::optional<Failure> verify_concurrent_calls(Judge& j, const CasePlan& plan) {
  if (j.memory.thread_calls < 2) return std::nullopt;  // no room for two copies: the plan's note says so
  std::optional<Failure> f = rounds(j, plan);
  if (f && !j.session.runner_alive()) return f;
  if (auto e = j.session.end_threads()) return f ? f : e;
  return f;
}

}  // namespace forge::worker
