// Getting a kernel out of a model's reply.
//
// Models wrap code in Markdown fences (```cuda, ```cpp, ```c++, ```c, bare ```),
// sometimes several (a helper, the kernel, a usage example), sometimes none. The
// kernel is the block that defines `forge_kernel`; when several do, the last
// (models revise as they go). A reply with no fence at all is taken whole when
// it defines `forge_kernel`. An unterminated last fence runs to the end of the
// reply (a reply cut off by max_tokens still shows what it had).
#pragma once

#include <string>
#include <vector>

namespace forge::llm {

struct CodeBlock {
  std::string info;  // the fence's info string, lower case: "cuda", "cpp", ""
  std::string text;
};

std::vector<CodeBlock> code_blocks(const std::string& reply);

struct Extracted {
  enum class Status { Found, NoEntry, NoCode };
  Status status = Status::NoCode;
  std::string source;  // Found: the kernel; NoEntry: the largest block, for the repair turn
};

Extracted extract_kernel(const std::string& reply);

// The model's one-line idea: the first sentence of the prose before its first
// code fence, Markdown marks and line breaks folded to plain words, at most
// `max_chars` (cut at a word, "..." added); "" when the reply opens with code.
std::string idea_of(const std::string& reply, size_t max_chars = 160);

// Does `source` define (not just mention) forge_kernel?
bool defines_entry(const std::string& source);

}  // namespace forge::llm
