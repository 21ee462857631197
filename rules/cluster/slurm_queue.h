// Slurm through its standard command-line tools, for the Slurm executor
// (rules/cluster/slurm_executor.h):
//   submit  `sbatch --parsable ARGS SCRIPT`      -> the job id ("123" or "123;cluster")
//   states  `squeue -h -t all -j ID -o '%i|%T|%r'` -> per array task: state and reason
//   cancel  `scancel ID...`
// These flags and format letters exist unchanged from Slurm 22.05 (Debian 12)
// to current releases. No accounting is assumed: sacct is not used, so a job
// is only visible while slurmctld keeps it (MinJobAge, 300 s by default); the
// executor decides completion from the files the job writes and uses squeue
// only to learn why a job ended without writing them.
//
// Interrupts: while any SignalWatch exists (they nest across threads; the
// first installs the handlers, the last restores them), SIGINT and SIGTERM only set a flag
// (`interrupted()`); the caller cancels its jobs, then `reraise()` restores the
// previous handlers and delivers the signal again, so forge still dies of it.
#pragma once

#include <atomic>
#include <csignal>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "util/process.h"

namespace forge {

struct SlurmTaskState {
  std::string state;   // PENDING, RUNNING, COMPLETED, CANCELLED, TIMEOUT, PREEMPTED, ...
  std::string reason;  // squeue's %r: "None", "JobArrayTaskLimit", "TimeLimit", ...
};

// True for states a job never leaves (it ran, or will never run).
bool slurm_state_final(const std::string& state);

// Parses `squeue -h -o '%i|%T|%r'` lines of job `job_id` into array index ->
// state. "123_4" is task 4; a pending range "123_[2-5%2]" or "123_[1,3]" names
// several; a plain "123" (not an array) is task 0. Other jobs' lines are skipped.
std::map<int, SlurmTaskState> parse_squeue(const std::string& out, const std::string& job_id);

// The array spec for sbatch: indices {0,1,2,5} with limit 2 -> "0-2,5%2"
// (limit 0: no "%").
std::string slurm_array_spec(const std::vector<int>& indices, int limit);

class SlurmQueue {
 public:
  explicit SlurmQueue(CommandRunner& runner) : m_runner(runner) {}

  // Throws forge::Error with sbatch's message when the job is refused.
  std::string submit(const std::vector<std::string>& args, const std::filesystem::path& script);
  // Empty when squeue no longer knows the job (or failed: then `error` says why).
  std::map<int, SlurmTaskState> states(const std::string& job_id, std::string* error = nullptr);
  void cancel(const std::vector<std::string>& job_ids);

 private:
  CommandRunner& m_runner;
};

class SignalWatch {
 public:
  SignalWatch();
  ~SignalWatch();  // restores the previous handlers
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;

  static bool interrupted() { return s_signal.load() != 0; }
  // Restores the previous handlers and raises the caught signal (returns only
  // when that handler returns, e.g. when it was ignored).
  void reraise();

 private:
  static void on_signal(int sig);
  static std::atomic<int> s_signal;
  bool m_released = false;
};

}  // namespace forge
