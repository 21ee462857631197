// The module stack per thread (modules.h).
#include "modules.h"

#include <vector>

namespace forge::capture {
namespace {

struct Stack {
  std::vector<size_t> marks;  // path's length before each open module
  std::string path;
};
thread_local Stack t_modules;

}  // namespace

void enter_module(const std::string& qualified_class) {
  Stack& s = t_modules;
  s.marks.push_back(s.path.size());
  if (!s.path.empty()) s.path += '/';
  s.path += qualified_class;
}

void exit_module() {
  Stack& s = t_modules;
  if (s.marks.empty()) return;  // a hook pair broken by an exception: nothing to undo
  s.path.resize(s.marks.back());
  s.marks.pop_back();
}

const std::string& module_path() { return t_modules.path; }

}  // namespace forge::capture
