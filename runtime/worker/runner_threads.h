// The runner's call threads: the concurrency check (verify_threads.cpp) calls
// the kernel from several of them at once. They start with the runner, before
// the candidate loads, because the sandbox lets no thread start after that;
// they end on the judge's request once the check is done, before any timed
// call, so no idle thread of the runner exists while the candidate is timed.
// Torch-free.
#pragma once

#include <functional>

namespace forge::runner {

// Starts n threads that wait for run_on_call_threads.
void start_call_threads(int n);
int call_threads();  // how many are running

// job(k) on thread k for every k < n (n <= call_threads()), released as close
// together as the cores allow; returns when all n returned. job must not throw.
void run_on_call_threads(int n, const std::function<void(int)>& job);

// The threads exit; returns when they have been joined.
int stop_call_threads();  // the number of threads joined

}  // namespace forge::runner
