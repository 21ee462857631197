// The module stack per thread (modules.h).
#include "modules.h"

#include <vector>

namespace forge::capture {
namespace {

struct Stack {
  std::vector<size_t> marks;  // path's length before each open module
  std::string path;
};
// Never freed: an op run by another thread_local's destructor at thread exit
// may still ask for the path (a leak of one small object per thread).
thread_local Stack* t_modules = nullptr;
Stack& stack() {
  if (!t_modules) t_modules = new Stack;
  return *t_modules;
}

}  // namespace

void enter_module(const std::string& qualified_class) {
  Stack& s = stack();
  s.marks.push_back(s.path.size());
  if (!s.path.empty()) s.path += '/';
  s.path += qualified_class;
}

void exit_module() {
  Stack& s = stack();
  if (s.marks.empty()) return;  // a hook pair broken by an exception: nothing to undo
  s.path.resize(s.marks.back());
  s.marks.pop_back();
}

const std::string& module_path() { return stack().path; }

}  // namespace forge::capture
