#include "engine/progress.h"

#include <unistd.h>

#include <cstdio>

namespace forge {

bool Progress::stderr_is_terminal() { return ::isatty(2) == 1; }

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
  std::fprintf(stderr, "\r\x1b[K%s", text.c_str());
  std::fflush(stderr);
  m_line_open = true;
}

}  // namespace forge
