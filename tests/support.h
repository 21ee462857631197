// Shared test helpers: a fresh temporary folder per test (removed afterwards;
// FORGE_KEEP_TMP=1 keeps them), and running the forge binary as a user would.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace forge::test {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return m_path; }
  std::filesystem::path operator/(const std::string& name) const { return m_path / name; }

 private:
  std::filesystem::path m_path;
};

void write_text(const std::filesystem::path& path, const std::string& text);
std::string read_text(const std::filesystem::path& path);

// A library template's source as forge loads it (targets/_common blocks
// inlined): a complete kernel file, e.g. to stand in for a user's own.
std::string library_kernel(const std::string& family, const std::string& strategy);

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs build/forge with `args` (a shell-quoted string) in `cwd`.
// `wrapper`: a command line the binary runs under (e.g. "timeout -s INT 5").
CliResult run_forge(const std::string& args, const std::filesystem::path& cwd,
                    const std::string& wrapper = "");

// `forge --json try TARGET FILE` in `dir`: the evaluation record it printed
// (the test fails, showing forge's stderr, when it printed none).
nlohmann::json forge_try(const std::filesystem::path& dir, const std::string& target, const std::string& file);

// True when a CUDA GPU is usable here; GPU tests start with FORGE_SKIP_WITHOUT_GPU().
bool have_gpu();

// True when the repository's .venv/bin/python imports torch (`make venv`);
// tests that run models start with FORGE_SKIP_WITHOUT_TORCH().
bool have_torch();

}  // namespace forge::test

// Marks a torch test as skipped, visibly, where torch is not importable.
#define FORGE_SKIP_WITHOUT_TORCH()                                                \
  do {                                                                            \
    if (!forge::test::have_torch()) {                                             \
      MESSAGE("SKIPPED (torch is not importable from .venv): run `make venv`");   \
      return;                                                                     \
    }                                                                             \
  } while (0)

// Marks a GPU test as skipped, visibly, on machines without a GPU.
#define FORGE_SKIP_WITHOUT_GPU()                                             \
  do {                                                                       \
    if (!forge::test::have_gpu()) {                                          \
      MESSAGE("SKIPPED (no GPU on this machine): "                           \
              << std::string(doctest::getContextOptions()->currentTest->m_name)); \
      return;                                                                \
    }                                                                        \
  } while (0)
