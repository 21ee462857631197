// A one-machine Slurm cluster and WebDAV cache for a test file
// (scripts/slurm-test-env.sh): started on first use, stopped when the test
// binary exits (also after failed checks). Test files that use it hold the
// ctest resource lock "daemons" (CMakeLists.txt), so only one runs at a time.
// When the daemons cannot be started (not root, packages unavailable) tests
// skip visibly with FORGE_SKIP_WITHOUT_DAEMONS().
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/support.h"

namespace forge::test {

class DaemonEnv {
 public:
  static DaemonEnv& get() {
    static DaemonEnv env;
    return env;
  }
  bool ok() const { return m_ok; }
  const std::string& why() const { return m_why; }
  const std::filesystem::path& dir() const { return m_dir; }
  std::string cache_url() const { return "http://127.0.0.1:18080/forge"; }
  std::filesystem::path dav_root() const { return m_dir / "dav"; }
  std::string script() const {
    return (std::filesystem::path(FORGE_TEST_DIR).parent_path() / "scripts" / "slurm-test-env.sh")
        .string();
  }
  // Stops / restarts the WebDAV server alone (the cache-down test).
  void stop_nginx() {
    std::system(("nginx -c '" + (m_dir / "etc/nginx.conf").string() + "' -p '" + m_dir.string() +
                 "' -s stop >/dev/null 2>&1; sleep 0.3")
                    .c_str());
  }
  void start_nginx() {
    std::system(("nginx -c '" + (m_dir / "etc/nginx.conf").string() + "' -p '" + m_dir.string() +
                 "' >/dev/null 2>&1")
                    .c_str());
  }
  ~DaemonEnv() {
    if (m_started) std::system(("'" + script() + "' stop '" + m_dir.string() + "' >/dev/null 2>&1").c_str());
  }

 private:
  DaemonEnv() : m_dir("/tmp/forge-test-daemons") {
    const std::string log = (std::filesystem::temp_directory_path() / "forge-test-daemons.log").string();
    int rc = std::system(("'" + script() + "' start '" + m_dir.string() + "' >'" + log + "' 2>&1").c_str());
    m_started = true;
    if (rc != 0) {
      m_why = read_text(log);
      while (!m_why.empty() && m_why.back() == '\n') m_why.pop_back();
      return;
    }
    ::setenv("SLURM_CONF", (m_dir / "etc/slurm.conf").c_str(), 1);
    m_ok = true;
  }
  std::filesystem::path m_dir;
  bool m_ok = false, m_started = false;
  std::string m_why;
};

}  // namespace forge::test

#define FORGE_SKIP_WITHOUT_DAEMONS()                                                  \
  do {                                                                                \
    if (!forge::test::DaemonEnv::get().ok()) {                                        \
      MESSAGE("SKIPPED (Slurm/nginx test daemons unavailable: "                      \
              << forge::test::DaemonEnv::get().why() << "): "                         \
              << std::string(doctest::getContextOptions()->currentTest->m_name));     \
      return;                                                                         \
    }                                                                                 \
  } while (0)
