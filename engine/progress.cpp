#include "engine/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace forge {

bool Progress::stderr_is_terminal() { return ::isatty(2) == 1; }

bool Progress::lines_requested() {
  const char* v = std::getenv("FORGE_PROGRESS");
  return v && std::string(v) == "lines";
}

void Progress::add_total(int n) {
  std::lock_guard lock(m_mutex);
  m_total += n;
}

void Progress::started(const std::string& kind, const std::string& label) {
  std::lock_guard lock(m_mutex);
  if (m_done >= m_total) m_total = m_done + 1;
  draw("[" + std::to_string(m_done + 1) + "/" + std::to_string(m_total) + "] " + kind + " " +
       label);
}

void Progress::finished() {
  std::lock_guard lock(m_mutex);
  ++m_done;
}

void Progress::warn(const std::string& message) {
  std::lock_guard lock(m_mutex);
  if (m_line_open) std::fputs("\r\x1b[K", stderr);
  m_line_open = false;
  std::fprintf(stderr, "forge: warning: %s\n", message.c_str());
}

void Progress::finish() {
  std::lock_guard lock(m_mutex);
  if (m_line_open) std::fputs("\r\x1b[K", stderr);
  m_line_open = false;
}

void Progress::draw(const std::string& text) {
  if (!m_enabled) return;
  if (m_lines) {
    const std::chrono::duration<double> t = std::chrono::steady_clock::now() - m_start;
    std::fprintf(stderr, "%8.1f s %s\n", t.count(), text.c_str());
    std::fflush(stderr);
    return;
  }
  std::fprintf(stderr, "\r\x1b[K%s", text.c_str());
  std::fflush(stderr);
  m_line_open = true;
}

}  // namespace forge
