#include <doctest/doctest.h>

#include <filesystem>

#include "tests/support.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace forge {
namespace fs = std::filesystem;

TEST_SUITE_BEGIN("util::AtomicFile");

TEST_CASE("commit replaces the target; the temp file is gone") {
  test::TempDir dir;
  test::write_text(dir / "f", "old");
  {
    AtomicFile f(dir / "f");
    f.write("new contents");
    CHECK(test::read_text(dir / "f") == "old");  // readers see the old file until commit
    f.commit();
  }
  CHECK(test::read_text(dir / "f") == "new contents");
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("an uncommitted write leaves the target untouched and no temp file") {
  test::TempDir dir;
  test::write_text(dir / "f", "old");
  {
    AtomicFile f(dir / "f");
    f.write("half");
  }
  CHECK(test::read_text(dir / "f") == "old");
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("parent folders are created; an impossible target is a forge::Error") {
  test::TempDir dir;
  write_file_atomic(dir / "a" / "b" / "c", "x");
  std::string out;
  CHECK(read_file(dir / "a" / "b" / "c", &out));
  CHECK(out == "x");
  test::write_text(dir / "plain", "file");
  CHECK_THROWS_AS(write_file_atomic(dir / "plain" / "child", "x"), Error);
  CHECK_FALSE(read_file(dir / "missing", &out));
}

TEST_SUITE_END();
}  // namespace forge
