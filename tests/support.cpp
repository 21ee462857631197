#include "tests/support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "rules/evaluate/family.h"
#include "rules/search/strategies.h"

namespace forge::test {
namespace fs = std::filesystem;

TempDir::TempDir() {
  static std::atomic<int> n{0};
  m_path = fs::temp_directory_path() /
           ("forge-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  fs::remove_all(m_path);
  fs::create_directories(m_path);
}

TempDir::~TempDir() {
  // FORGE_KEEP_TMP=1 keeps every test folder for inspection.
  if (std::getenv("FORGE_KEEP_TMP")) {
    MESSAGE("kept " << m_path.string());
    return;
  }
  std::error_code ec;
  fs::remove_all(m_path, ec);
}

void write_text(const fs::path& path, const std::string& text) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string library_kernel(const std::string& family, const std::string& strategy) {
  for (const auto& f : load_families(default_targets_dir()))
    if (f.name == family)
      for (const auto& s : load_strategies(f))
        if (s.name == strategy) return s.text;
  throw std::runtime_error("no strategy " + family + "/" + strategy + " in the library");
}

CliResult run_forge(const std::string& args, const fs::path& cwd, const std::string& wrapper) {
  static std::atomic<int> n{0};
  fs::path base = fs::temp_directory_path() /
                  ("forge-cli-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  std::string cmd = "cd '" + cwd.string() + "' && " + wrapper + " '" FORGE_BINARY "' " + args + " >'" +
                    base.string() + ".out' 2>'" + base.string() + ".err' </dev/null";
  const auto t0 = std::chrono::steady_clock::now();
  int status = std::system(cmd.c_str());
  // FORGE_TEST_TIMES=1: each forge command's wall time on stderr, to find
  // where a slow test spends it.
  if (const char* times = std::getenv("FORGE_TEST_TIMES"); times && *times == '1')
    std::fprintf(stderr, "[forge %.1f s] %s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), args.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(base.string() + ".out");
  r.err = read_text(base.string() + ".err");
  fs::remove(base.string() + ".out");
  fs::remove(base.string() + ".err");
  return r;
}

nlohmann::json forge_try(const fs::path& dir, const std::string& target, const std::string& file) {
  CliResult t = run_forge("--json try " + target + " " + file, dir);
  INFO(target << " " << file << ": " << t.err);
  nlohmann::json rec = nlohmann::json::parse(t.out, nullptr, false);
  REQUIRE(rec.is_object());
  return rec;
}

bool have_gpu() {
  static const bool gpu = std::system("nvidia-smi -L >/dev/null 2>&1") == 0;
  return gpu;
}

bool have_torch() {
  static const bool ok = [] {
    const auto python = std::filesystem::path(FORGE_TEST_DIR).parent_path() / ".venv" / "bin" / "python";
    return std::system(("'" + python.string() + "' -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
  }();
  return ok;
}

}  // namespace forge::test
