// Ninja-style one-line progress on stderr: "[3/12] verify resnet50/_softmax/3fa2c1 #4",
// rewritten in place on a terminal and silent otherwise (logs stay clean in CI).
// Warnings always print, on their own line.
#pragma once

#include <mutex>
#include <string>

namespace forge {

class Progress {
 public:
  // `enabled` = stderr is a terminal (the caller decides, so tests can force it).
  explicit Progress(bool enabled) : m_enabled(enabled) {}
  ~Progress() { finish(); }

  void add_total(int n);
  void started(const std::string& kind, const std::string& label);
  void finished();
  void warn(const std::string& message);
  void finish();  // ends the status line

  static bool stderr_is_terminal();

 private:
  void draw(const std::string& text);
  bool m_enabled;
  std::mutex m_mutex;
  int m_done = 0, m_total = 0;
  bool m_line_open = false;
};

}  // namespace forge
