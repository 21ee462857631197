#include <doctest/doctest.h>

#include <cstdio>
#include <unistd.h>

#include "engine/progress.h"
#include "tests/support.h"

namespace forge {

TEST_SUITE_BEGIN("engine::Progress");

namespace {
// Runs `body` with stderr redirected to a file and returns what it wrote.
template <typename F>
std::string capture_stderr(F body) {
  test::TempDir dir;
  std::fflush(stderr);
  int saved = ::dup(2);
  FILE* f = std::fopen((dir / "err").c_str(), "w");
  ::dup2(::fileno(f), 2);
  body();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::fclose(f);
  return test::read_text(dir / "err");
}
}  // namespace

TEST_CASE("ninja-style status line on a terminal") {
  std::string out = capture_stderr([] {
    Progress p(true);
    p.add_total(12);
    p.started("verify", "resnet50/_softmax/3fa2c1 #4");
    p.finished();
    p.finish();
  });
  CHECK(out == "\r\x1b[K[1/12] verify resnet50/_softmax/3fa2c1 #4\r\x1b[K");
}

TEST_CASE("quiet when not a terminal, but warnings always print") {
  std::string out = capture_stderr([] {
    Progress p(false);
    p.started("capture", "cnn");
    p.warn("store is read-only");
    p.finished();
  });
  CHECK(out == "forge: warning: store is read-only\n");
}

TEST_CASE("FORGE_PROGRESS=lines: one line per step with the seconds since the start") {
  std::string out = capture_stderr([] {
    Progress p(false, true);
    p.add_total(2);
    p.started("compile", "cnn/_softmax #1");
    p.finished();
    p.started("verify", "cnn/_softmax #1");
    p.finish();
  });
  CHECK(out.find('\r') == std::string::npos);
  CHECK(out.find(" s [1/2] compile cnn/_softmax #1\n") != std::string::npos);
  CHECK(out.find(" s [2/2] verify cnn/_softmax #1\n") != std::string::npos);
  CHECK(out.rfind("     0.0 s ", 0) == 0);
}

TEST_SUITE_END();
}  // namespace forge
