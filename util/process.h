// Running other programs: the one place forge forks. Everything above talks to
// CommandRunner so tests can substitute a fake (tests/engine/fake_runner.h).
//
// A command runs in its own process group; on timeout the whole group gets
// SIGTERM, then SIGKILL after a grace period, so a hung child (or its children)
// never outlives the step.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace forge {

struct Command {
  std::vector<std::string> argv;                // argv[0] is looked up in PATH
  std::filesystem::path cwd;                    // empty = current directory
  std::map<std::string, std::string> env;       // set on top of the inherited environment
  std::vector<std::string> unset_env;           // removed from the inherited environment
  double timeout_seconds = 0;                   // 0 = none
  std::optional<std::filesystem::path> stdout_path;  // else captured into Result::out
  std::optional<std::filesystem::path> stderr_path;  // else captured into Result::err
  bool inherit_stdio = false;                   // pass the terminal through (forge run)
};

struct CommandResult {
  enum class Status { Exited, Signaled, TimedOut, FailedToStart };
  Status status = Status::FailedToStart;
  int exit_code = -1;  // when Exited
  int signal = 0;      // when Signaled
  std::string out, err;
  double seconds = 0;

  bool ok() const { return status == Status::Exited && exit_code == 0; }
  // "exit code 3", "killed by signal 11 (Segmentation fault)", "timed out after 5 s"...
  std::string describe() const;
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  virtual CommandResult run(const Command& command) = 0;
};

std::unique_ptr<CommandRunner> make_process_runner();

// `sh -c TEXT`, the way a manifest's `run:` line is executed.
std::vector<std::string> shell_argv(const std::string& text);

}  // namespace forge
