// A CommandRunner that runs nothing: each call is recorded and answered by a
// handler, so engine and rule tests exercise real control flow without
// processes, torch or a GPU (ninja's build_test.cc FakeCommandRunner idea).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "util/process.h"

namespace forge::test {

class FakeRunner : public CommandRunner {
 public:
  using Handler = std::function<CommandResult(const Command&)>;
  explicit FakeRunner(Handler h) : m_handler(std::move(h)) {}
  CommandResult run(const Command& c) override {
    m_calls.push_back(c);
    return m_handler(c);
  }
  const std::vector<Command>& calls() const { return m_calls; }
  // How many calls had `word` somewhere in their argv.
  int count(const std::string& word) const {
    int n = 0;
    for (const auto& c : m_calls)
      for (const auto& a : c.argv)
        if (a.find(word) != std::string::npos) {
          ++n;
          break;
        }
    return n;
  }

 private:
  Handler m_handler;
  std::vector<Command> m_calls;
};

inline CommandResult exited(int code, std::string out = "", std::string err = "") {
  CommandResult r;
  r.status = CommandResult::Status::Exited;
  r.exit_code = code;
  r.out = std::move(out);
  r.err = std::move(err);
  return r;
}

}  // namespace forge::test
