#include "runner_threads.h"

#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace forge::runner {
namespace {

std::vector<std::thread> g_threads;
std::mutex g_mu;
std::condition_variable g_wake, g_done_cv;
uint64_t g_generation = 0;  // one per run; a thread runs each generation once
int g_n = 0;
int g_done = 0;
bool g_stop = false;
const std::function<void(int)>* g_job = nullptr;
std::atomic<int> g_arrived{0};

void loop(int k, int cpu) {
  // Each thread on a core of its own: woken together, the scheduler would
  // otherwise often queue them on the waker's core, where they run one after
  // the other and overlap nothing.
  if (cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    (void)::sched_setaffinity(0, sizeof one, &one);
  }
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    int n = 0;
    {
      std::unique_lock<std::mutex> lock(g_mu);
      g_wake.wait(lock, [&] { return g_stop || g_generation != seen; });
      if (g_stop) return;
      seen = g_generation;
      job = g_job;
      n = g_n;
    }
    if (k < n) {
      // A start barrier: a call begins only when all n threads are awake, so
      // the calls overlap even when each is a few microseconds long.
      g_arrived.fetch_add(1);
      for (int spin = 0; g_arrived.load() < n; ++spin)
        if (spin > (1 << 16)) ::sched_yield();
      (*job)(k);
    }
    std::lock_guard<std::mutex> lock(g_mu);
    if (++g_done == static_cast<int>(g_threads.size())) g_done_cv.notify_all();
  }
}

}  // namespace

void start_call_threads(int n) {
  std::vector<int> cpus;
  cpu_set_t allowed;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  for (int k = 0; k < n; ++k)
    g_threads.emplace_back(loop, k, cpus.empty() ? -1 : cpus[static_cast<size_t>(k) % cpus.size()]);
}

int call_threads() { return static_cast<int>(g_threads.size()); }

void run_on_call_threads(int n, const std::function<void(int)>& job) {
  std::unique_lock<std::mutex> lock(g_mu);
  g_job = &job;
  g_n = n < call_threads() ? n : call_threads();
  g_done = 0;
  g_arrived.store(0);
  ++g_generation;
  g_wake.notify_all();
  g_done_cv.wait(lock, [] { return g_done == static_cast<int>(g_threads.size()); });
  g_job = nullptr;
}

int stop_call_threads() {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_stop = true;
  }
  g_wake.notify_all();
  for (auto& t : g_threads) t.join();
  const int joined = static_cast<int>(g_threads.size());
  g_threads.clear();
  return joined;
}

}  // namespace forge::runner
