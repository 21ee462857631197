// Ninja-style one-line progress on stderr: "[3/12] verify resnet50/_softmax/3fa2c1 #4",
// rewritten in place on a terminal and silent otherwise (logs stay clean in CI).
// FORGE_PROGRESS=lines prints each step on its own line with the seconds since the
// start instead, for logs that must say where a long build spent its time.
// Warnings always print, on their own line.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

namespace forge {

class Progress {
 public:
  // `enabled` = stderr is a terminal (the caller decides, so tests can force it).
  explicit Progress(bool enabled, bool lines = false)
      : m_enabled(enabled || lines), m_lines(lines), m_start(std::chrono::steady_clock::now()) {}
  ~Progress() { finish(); }

  void add_total(int n);
  void started(const std::string& kind, const std::string& label);
  void finished();
  void warn(const std::string& message);
  void finish();  // ends the status line

  static bool stderr_is_terminal();
  static bool lines_requested();  // FORGE_PROGRESS=lines

 private:
  void draw(const std::string& text);
  bool m_enabled;
  bool m_lines;
  std::chrono::steady_clock::time_point m_start;
  std::mutex m_mutex;
  int m_done = 0, m_total = 0;
  bool m_line_open = false;
};

}  // namespace forge
