// Static checks on a candidate kernel's source, run before it is compiled:
// cheap tripwires for what the candidate ABI (runtime/abi/forge_kernel.h)
// forbids. Each rule has an id and a one-line rationale; a violation names the
// rule, the 1-based line and that line's text.
//
// Comments and string literals are blanked before the token rules run, so a
// comment that mentions "std::thread" passes; #include lines are read with
// strings intact (a quoted include is a path, not a string).
//
// These are tripwires, not a sandbox: what they cannot see (a name pasted
// together by a macro, a raw system call) the worker still meets with
// verification (inputs compared, ATen ops counted, CUPTI) and containment
// (crash, hang, sticky CUDA error). The link also refuses undefined symbols
// (rules/evaluate/compile.h), so a library can only be reached through what these rules
// reject (dlopen/dlsym, vendor headers).
#pragma once

#include <string>
#include <vector>

namespace forge {

enum class CandidateLang { Cpp, Cuda };

struct StaticRule {
  const char* id;         // "thread", "io", ...
  const char* rationale;  // one line: why a kernel must not do this
  // The backends it concerns (stream rules: CUDA; inline_asm: CPU); a prompt
  // for the other backend leaves it out. The check itself ignores this.
  bool cpp = true, cuda = true;
};

// Every rule, in the order they are checked.
const std::vector<StaticRule>& static_rules();
// The rules that concern `lang`'s candidates (what a prompt for that backend lists).
std::vector<StaticRule> static_rules(CandidateLang lang);

struct StaticViolation {
  std::string rule;       // StaticRule::id
  int line = 0;           // 1-based; 0 for a whole-file rule (no_entry)
  std::string text;       // the offending source line, trimmed
  std::string rationale;  // StaticRule::rationale

  // "thread (line 12): starts a thread ...: `std::thread t(f);`"
  std::string describe() const;
};

// All violations of `source`, in rule order then line order; empty = passes.
std::vector<StaticViolation> static_check(const std::string& source, CandidateLang lang);

// `source` with comments (and, unless keep_strings, the contents of string and
// character literals) replaced by spaces; newlines and offsets are kept, so
// line numbers still match.
std::string blank_comments(const std::string& source, bool keep_strings);

}  // namespace forge
