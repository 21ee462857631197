// The judge's side of the runner (runner_protocol.h): starts forge_runner
// processes ahead of need, sends requests, reads replies with a deadline, and
// names how a runner ended: crashed, forbidden (killed by the sandbox), timed
// out, or broke the protocol. Torch-free.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "arena.h"
#include "runner_protocol.h"

namespace forge::worker {

// A request's outcome. ok: `reply` holds the runner's answer (its word, to be
// checked) and `round_trip_us` the judge's own clock from send to reply.
// Otherwise the runner is gone and reason/detail say why, as reply reasons
// of docs/WORKER.md ("crashed (signal 11: Segmentation fault)", "forbidden",
// "timeout").
struct RunnerResult {
  bool ok = false;
  runner::Reply reply{};
  double round_trip_us = 0;
  std::string reason, detail;
};

class Runner {
 public:
  // fork + exec of `exe` with a socket pair; the child keeps only the socket,
  // its log (a memory file) and /dev/null. Throws std::runtime_error.
  static std::unique_ptr<Runner> spawn(const std::string& exe, bool cuda, int device);
  ~Runner();  // SIGKILL and reap
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  RunnerResult attach(const Arena& arena, double timeout_s);
  RunnerResult load(const std::string& path, double timeout_s);
  // Sends q (magic and seq are set here) and waits for its reply.
  RunnerResult request(runner::Request& q, double timeout_s);
  // The end of an evaluation: Quit, then exactly one Bye and the exit. "" or
  // what went wrong (a message nobody asked for, an early death).
  std::string finish(double timeout_s);
  bool alive() const { return m_pid > 0; }
  pid_t pid() const { return m_pid; }
  // The last lines of what the runner (the candidate) printed.
  std::string log_tail(size_t max_chars = 600) const;

 private:
  Runner() = default;
  RunnerResult exchange(runner::Request& q, int fd, double timeout_s);
  RunnerResult died();
  void kill_now();
  int m_sock = -1;
  int m_log = -1;
  pid_t m_pid = -1;
  uint64_t m_seq = 0;
};

// Keeps one runner started ahead (a CUDA context takes a few hundred ms), so
// an evaluation does not wait for it.
class RunnerPool {
 public:
  RunnerPool(std::string exe, bool cuda, int device);
  std::unique_ptr<Runner> take();  // a started runner; starts the next one
 private:
  std::string m_exe;
  bool m_cuda;
  int m_device;
  std::unique_ptr<Runner> m_next;
};

// forge_runner beside this executable.
std::string runner_path();

}  // namespace forge::worker
