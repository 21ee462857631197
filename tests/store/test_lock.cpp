#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "store/lock.h"
#include "tests/support.h"
#include "util/error.h"

namespace fs = std::filesystem;
using forge::store::StoreLock;
using forge::test::TempDir;
using Clock = std::chrono::steady_clock;

namespace {

// Forks a child that takes the lock, tells the parent, then sleeps `hold_ms`
// (or forever when negative) and exits. Returns the child's pid once it holds it.
pid_t spawn_holder(const fs::path& root, int hold_ms) {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    StoreLock lock(root, nullptr);
    (void)!::write(pipe_fds[1], "x", 1);
    if (hold_ms < 0)
      while (true) ::pause();
    ::usleep(static_cast<useconds_t>(hold_ms) * 1000);
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  char c = 0;
  REQUIRE(::read(pipe_fds[0], &c, 1) == 1);
  ::close(pipe_fds[0]);
  return child;
}

int wait_exit_code(pid_t child) {
  int status = 0;
  if (::waitpid(child, &status, 0) != child) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_SUITE_BEGIN("store::StoreLock");

TEST_CASE("the lock is exclusive, records its holder and is released on destruction") {
  TempDir dir;
  const fs::path root = dir / ".forge";
  {
    std::optional<StoreLock> first = StoreLock::try_lock(root);  // creates root
    REQUIRE(first);
    CHECK(first->path() == root / "lock");
    CHECK(StoreLock::holder_pid(root) == ::getpid());
    CHECK_FALSE(StoreLock::try_lock(root));  // a second open file cannot take it

    StoreLock moved = std::move(*first);  // moving keeps the one lock
    first.reset();
    CHECK_FALSE(StoreLock::try_lock(root));
  }
  CHECK(StoreLock::holder_pid(root) == 0);
  CHECK(StoreLock::try_lock(root));
  CHECK(fs::exists(root / "lock"));  // never deleted
}

TEST_CASE("the constructor does not wait or call on_wait when the lock is free") {
  TempDir dir;
  int waits = 0;
  StoreLock lock(dir / ".forge", [&](const std::string&) { ++waits; });
  CHECK(waits == 0);
}

TEST_CASE("a second process waits, is told who holds the lock, and gets it after") {
  TempDir dir;
  const fs::path root = dir / ".forge";
  const pid_t child = spawn_holder(root, 300);
  CHECK(StoreLock::holder_pid(root) == child);
  CHECK_FALSE(StoreLock::try_lock(root));

  std::vector<std::string> messages;
  const auto start = Clock::now();
  {
    StoreLock lock(root, [&](const std::string& msg) { messages.push_back(msg); });
    const auto waited = Clock::now() - start;
    CHECK(waited >= std::chrono::milliseconds(150));
    REQUIRE(messages.size() == 1);
    CHECK(messages[0] == "waiting for another forge (pid " + std::to_string(child) + ") holding " +
                             (root / "lock").string());
    CHECK(StoreLock::holder_pid(root) == ::getpid());
  }
  CHECK(wait_exit_code(child) == 0);
}

TEST_CASE("a killed holder releases the lock") {
  TempDir dir;
  const fs::path root = dir / ".forge";
  const pid_t child = spawn_holder(root, -1);
  CHECK_FALSE(StoreLock::try_lock(root));
  ::kill(child, SIGKILL);
  CHECK(wait_exit_code(child) == 128 + SIGKILL);
  CHECK(StoreLock::try_lock(root));
}

TEST_CASE("a lock folder that cannot be created is a forge::Error") {
  TempDir dir;
  forge::test::write_text(dir / "file", "not a folder");
  CHECK_THROWS_AS(StoreLock(dir / "file" / ".forge", nullptr), forge::Error);
  CHECK_THROWS_AS(StoreLock::try_lock(dir / "file" / ".forge"), forge::Error);
}

TEST_SUITE_END();
