// The forge binary as a user runs it: exit codes, exact error texts, --json.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "tests/support.h"

namespace forge {
using nlohmann::json;
using test::run_forge;

TEST_SUITE_BEGIN("cli");

TEST_CASE("help and version") {
  test::TempDir dir;
  auto r = run_forge("help", dir.path());
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("build [--budget N]") != std::string::npos);
  CHECK(r.out.find("explain TARGET|MODEL") != std::string::npos);
  r = run_forge("--json version", dir.path());
  CHECK(r.exit_code == 0);
  CHECK(json::parse(r.out)["version"] == FORGE_VERSION);
}

TEST_CASE("usage errors exit 2 with one line, and suggest the near command") {
  test::TempDir dir;
  auto r = run_forge("biuld", dir.path());
  CHECK(r.exit_code == 2);
  CHECK(r.err == "forge: error: unknown command 'biuld' (did you mean 'build'?); `forge help` lists them\n");
  r = run_forge("--frob", dir.path());
  CHECK(r.exit_code == 2);
  CHECK(r.err == "forge: error: unknown option '--frob'\n");
  r = run_forge("build --budget lots", dir.path());
  CHECK(r.exit_code == 2);
  CHECK(r.err == "forge: error: --budget needs a non-negative integer, got 'lots'\n");
  r = run_forge("version extra", dir.path());
  CHECK(r.err == "forge: error: unexpected argument 'extra' for 'version'\n");
}

TEST_CASE("every command prints its usage with --help, -h or `forge help COMMAND`, before reading any manifest") {
  test::TempDir dir;  // no forge.yaml: --help needs none
  for (const char* cmd : {"build", "capture", "status", "explain", "try", "log", "diff", "replay", "bisect", "run",
                          "serve", "clean", "version"}) {
    CAPTURE(cmd);
    auto r = run_forge(std::string(cmd) + " --help", dir.path());
    CHECK(r.exit_code == 0);
    CHECK(r.out.rfind(std::string("usage: forge [-C DIR] [--json] ") + cmd, 0) == 0);
    CHECK(r.err == "");
    CHECK(run_forge(std::string(cmd) + " -h", dir.path()).out == r.out);
    CHECK(run_forge(std::string("help ") + cmd, dir.path()).out == r.out);
  }
  auto r = run_forge("status --help", dir.path());
  CHECK(r.out.find("--all") != std::string::npos);
  r = run_forge("help nosuch", dir.path());
  CHECK(r.exit_code == 2);
  CHECK(r.err.rfind("forge: error: unknown command 'nosuch'", 0) == 0);
  // After `--` a --help belongs to the program forge run starts.
  r = run_forge("run -- python3 --help", dir.path());
  CHECK(r.out.find("usage: forge") == std::string::npos);
  r = run_forge("status --frob", dir.path());
  CHECK(r.exit_code == 2);
  CHECK(r.err == "forge: error: unexpected argument '--frob' for 'status' (`forge status --help`)\n");
}

TEST_CASE("a missing manifest is an error that names the file") {
  test::TempDir dir;
  auto r = run_forge("-C " + dir.path().string() + " status", "/");
  CHECK(r.exit_code == 1);
  CHECK(r.err.rfind("forge: error: cannot read " + (dir / "forge.yaml").string(), 0) == 0);
}

TEST_CASE("a manifest error prints file:line:col, the line and a caret, exit 2") {
  test::TempDir dir;
  test::write_text(dir / "forge.yaml", "models:\n  m: {run: python m.py}\nbudgt: {}\n");
  auto r = run_forge("build", dir.path());
  CHECK(r.exit_code == 2);
  CHECK(r.out == "");
  CHECK(r.err.find(":3:1: unknown key 'budgt' (did you mean 'budget'?)\nbudgt: {}\n^\n") !=
        std::string::npos);
  // Nothing was built, and nothing already built would have been touched.
  CHECK_FALSE(std::filesystem::exists(dir / ".forge"));
}

TEST_CASE("clean removes the store and is idempotent") {
  test::TempDir dir;
  test::write_text(dir / "forge.yaml", "models:\n  m: {run: python m.py}\n");
  test::write_text(dir / ".forge" / "objects" / "x", "data");
  auto r = run_forge("clean", dir.path());
  CHECK(r.exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(dir / ".forge"));
  r = run_forge("--json clean", dir.path());
  CHECK(r.exit_code == 0);
  CHECK(json::parse(r.out)["removed"] == false);
}

TEST_CASE("forge run refuses a package whose end-to-end check failed, unless --unchecked") {
  test::TempDir dir;
  test::write_text(dir / "forge.yaml", "models:\n  m: {run: python m.py}\n");
  const auto pkg = dir / ".forge" / "package";
  test::write_text(pkg / "libforge.so", "");  // never loaded: the command is not python
  test::write_text(pkg / "digest", "d1");
  test::write_text(pkg / "checks.json",
                   R"({"digest": "d1", "models": {"m": {"status": "failed",)"
                   R"( "reason": "`python m.py` with libforge.so loaded exit code 139"}}})");
  auto r = run_forge("run -- true", dir.path());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("end-to-end check of this package failed for model 'm'") != std::string::npos);
  CHECK(r.err.find("exit code 139") != std::string::npos);
  r = run_forge("run --unchecked -- true", dir.path());
  CHECK(r.exit_code == 0);
  // Verdicts about another package (digest changed since) do not block it.
  test::write_text(pkg / "digest", "d2");
  CHECK(run_forge("run -- true", dir.path()).exit_code == 0);
  // Nor does a passing check.
  test::write_text(pkg / "digest", "d1");
  test::write_text(pkg / "checks.json", R"({"digest": "d1", "models": {"m": {"status": "ok", "reason": ""}}})");
  CHECK(run_forge("run -- true", dir.path()).exit_code == 0);
}

TEST_SUITE_END();
}  // namespace forge
