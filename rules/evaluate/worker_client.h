// A long-lived child that speaks JSON lines: the evaluation worker
// (docs/WORKER.md). forge writes one request per line to its stdin and reads
// exactly one reply line from its stdout; the first line it prints is a hello.
// util/process.h's CommandRunner runs commands to completion; this keeps one
// running across requests, with the same discipline: the child gets its own
// process group, and every way of ending it (timeout, a garbled line, a crash,
// destruction) kills the whole group, so nothing it started outlives it.
//
// Nothing the child does can hurt forge: a crash, a hang or garbage on stdout
// comes back as a WorkerReply status with a named reason, the child is gone,
// and the next request starts a fresh one. The child's stderr is appended to a
// log file; a crash's detail quotes its last lines.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace forge {

struct WorkerCommand {
  std::vector<std::string> argv;           // argv[0]: a path, or looked up in PATH
  std::map<std::string, std::string> env;  // on top of the inherited environment
  std::filesystem::path cwd;               // empty = forge's
  std::filesystem::path log;               // the child's stderr, appended (required)
  double start_timeout_seconds = 300;      // for the hello line
};

struct WorkerReply {
  enum class Status {
    Ok,        // `value` is the reply line
    Timeout,   // no reply in time: reason "timeout"
    Crashed,   // the child died: "crashed (signal 11: Segmentation fault)", "crashed (exit code 3)"
    Protocol,  // a line that is not a JSON reply to this request: "worker_protocol"
    StartFailed,  // no hello: "worker_failed_to_start"
  };
  Status status = Status::StartFailed;
  nlohmann::json value;
  std::string reason;  // "" when Ok
  std::string detail;  // one line
  double seconds = 0;  // from sending the request to the reply (or the failure)

  bool ok() const { return status == Status::Ok; }
};

class WorkerProcess {
 public:
  explicit WorkerProcess(WorkerCommand command);
  // Asks a running child to quit, waits briefly, then kills its group.
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Sends `request` with a fresh "id" and waits up to `timeout_seconds` for the
  // one reply line carrying that id. Starts the child first when none runs (the
  // start has its own timeout). Thread-safe; requests are serialized.
  WorkerReply request(nlohmann::json request, double timeout_seconds);

  // Starts the child unless running; Ok with the hello as value, or StartFailed.
  WorkerReply start();

  // Kills the child's group now (e.g. after a reply that may have left it
  // unhealthy). The next request starts a new one.
  void stop();

  bool running() const { return m_pid > 0; }
  pid_t pid() const { return m_pid; }
  const nlohmann::json& hello() const { return m_hello; }  // of the latest child
  int starts() const { return m_starts; }                  // children started so far

 private:
  WorkerReply start_locked();
  void kill_group();
  // One line from the child, or the status that ended the wait.
  WorkerReply::Status read_line(double deadline_seconds, std::string* line);
  // The child is gone (EOF, dead): reaps it and describes how it ended.
  WorkerReply died(double seconds);
  std::string log_tail() const;

  WorkerCommand m_command;
  std::mutex m_mutex;
  pid_t m_pid = -1;
  int m_in = -1;         // the child's stdin (we write)
  int m_out = -1;        // the child's stdout (we read)
  std::string m_buffer;  // bytes read past the last line
  nlohmann::json m_hello;
  int m_starts = 0;
  long long m_next_id = 1;
  uintmax_t m_log_offset = 0;  // log size when the current request began
};

}  // namespace forge
