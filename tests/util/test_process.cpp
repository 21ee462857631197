#include <doctest/doctest.h>

#include "tests/support.h"
#include "util/interrupt.h"
#include "util/process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

namespace forge {

TEST_SUITE_BEGIN("util::Process");

TEST_CASE("exit codes, output and environment") {
  auto runner = make_process_runner();
  Command c;
  c.argv = shell_argv("echo out; echo err >&2; echo $FORGE_X; exit 3");
  c.env["FORGE_X"] = "set";
  CommandResult r = runner->run(c);
  CHECK(r.status == CommandResult::Status::Exited);
  CHECK(r.exit_code == 3);
  CHECK(r.out == "out\nset\n");
  CHECK(r.err == "err\n");
  CHECK(r.describe() == "exit code 3");
}

TEST_CASE("a hung command is killed at its timeout, children included") {
  auto runner = make_process_runner();
  Command c;
  c.argv = shell_argv("sleep 30 & sleep 30");
  c.timeout_seconds = 0.5;
  CommandResult r = runner->run(c);
  CHECK(r.status == CommandResult::Status::TimedOut);
  CHECK(r.seconds < 5);
}

TEST_CASE("an interrupted build stops the command it is waiting on, children included") {
  auto runner = make_process_runner();
  Command c;
  c.argv = shell_argv("sleep 30 & sleep 30");
  std::thread signal_later([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    set_interrupted(true);  // what Ctrl-C does (util/interrupt.h)
  });
  CommandResult r = runner->run(c);
  signal_later.join();
  set_interrupted(false);
  CHECK(r.status == CommandResult::Status::Signaled);
  CHECK(r.seconds < 5);
}

// What `forge build` does while it opens its session (the toolchain probe):
// the command finishes, and the signal is seen once the hold ends.
TEST_CASE("under an InterruptHold a signal leaves the command running and is seen after") {
  auto runner = make_process_runner();
  Command c;
  c.argv = shell_argv("sleep 0.8; echo done");
  CommandResult r;
  {
    InterruptHold hold;
    std::thread signal_later([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      set_interrupted(true);
    });
    r = runner->run(c);
    signal_later.join();
    CHECK_FALSE(interrupted());
  }
  CHECK(interrupted());
  set_interrupted(false);
  CHECK(r.ok());
  CHECK(r.out == "done\n");
}

// `timeout -s INT` sends its signal to forge and then to forge's process
// group: one request, delivered twice. Only a later repeat stops at once.
// Each case runs in a forked child, whose handler and death are its own.
TEST_CASE("a signal delivered twice at once is one request; a later repeat ends the process") {
  auto child_status = [](int gap_ms) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      install_interrupt_handler();
      std::raise(SIGINT);
      if (gap_ms > 0) usleep(useconds_t(gap_ms) * 1000);
      std::raise(SIGINT);
      _exit(interrupted() ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
  };
  const int together = child_status(0);
  CHECK(WIFEXITED(together));
  CHECK(WEXITSTATUS(together) == 0);
  const int later = child_status(700);
  CHECK(WIFSIGNALED(later));
  CHECK(WTERMSIG(later) == SIGINT);
}

TEST_CASE("a crashing command is reported with its signal") {
  auto runner = make_process_runner();
  Command c;
  c.argv = shell_argv("kill -SEGV $$");
  CommandResult r = runner->run(c);
  CHECK(r.status == CommandResult::Status::Signaled);
  CHECK(r.describe() == "killed by signal 11 (Segmentation fault)");
}

TEST_CASE("a missing program exits 127 with a message; cwd and output files work") {
  test::TempDir dir;
  auto runner = make_process_runner();
  Command c;
  c.argv = {"forge-no-such-program"};
  CommandResult r = runner->run(c);
  CHECK(r.exit_code == 127);
  CHECK(r.err.find("cannot run forge-no-such-program") != std::string::npos);
  c.argv = {"pwd"};
  c.cwd = dir.path();
  c.stdout_path = dir / "out.txt";
  r = runner->run(c);
  CHECK(r.ok());
  CHECK(test::read_text(dir / "out.txt") == dir.path().string() + "\n");
}

TEST_CASE("a background child holding the pipe does not hang the caller") {
  auto runner = make_process_runner();
  Command c;
  c.argv = shell_argv("(sleep 20 &) ; echo done");
  CommandResult r = runner->run(c);
  CHECK(r.ok());
  CHECK(r.seconds < 5);
}

TEST_SUITE_END();
}  // namespace forge
