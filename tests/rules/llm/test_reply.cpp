// Getting the kernel out of a model's reply.
#include <doctest/doctest.h>

#include "rules/llm/reply.h"

namespace forge {
using llm::Extracted;

TEST_SUITE_BEGIN("rules::llm::Reply");

TEST_CASE("fenced blocks in every dialect") {
  for (const char* info : {"cuda", "cpp", "c++", "C", ""}) {
    CAPTURE(info);
    const std::string reply = std::string("Idea: one pass.\n```") + info +
                              "\n#include \"forge_kernel.h\"\nextern \"C\" int forge_kernel(const "
                              "forge_call* call) { return 0; }\n```\nDone.";
    Extracted x = llm::extract_kernel(reply);
    CHECK(x.status == Extracted::Status::Found);
    CHECK(x.source.rfind("#include \"forge_kernel.h\"\n", 0) == 0);
    CHECK(x.source.find("```") == std::string::npos);
  }
}

TEST_CASE("several blocks: the one that defines forge_kernel, the last if several") {
  const std::string reply =
      "```cpp\nstatic inline float helper(float x) { return x; }\n```\n"
      "```cpp\n// first\nextern \"C\" int forge_kernel(const forge_call* c) {\n  return 1;\n}\n```\n"
      "Usage:\n```python\nforge_kernel(call)\n```\n"
      "```cpp\n// second\nextern \"C\" int forge_kernel(const forge_call* c) {\n  return 0;\n}\n```\n";
  Extracted x = llm::extract_kernel(reply);
  REQUIRE(x.status == Extracted::Status::Found);
  CHECK(x.source.find("// second") == 0);
  CHECK(llm::code_blocks(reply).size() == 4);
}

TEST_CASE("no fence, an unterminated fence, no entry point, no code") {
  CHECK(llm::extract_kernel("#include <x>\nint forge_kernel(const forge_call* c) { return 0; }\n")
            .status == Extracted::Status::Found);
  Extracted cut = llm::extract_kernel("```cuda\nint forge_kernel(const forge_call* c) {\n  return 0;");
  CHECK(cut.status == Extracted::Status::Found);
  Extracted noentry = llm::extract_kernel("```cpp\nint kernel_main() { return 0; }\n```");
  CHECK(noentry.status == Extracted::Status::NoEntry);
  CHECK(noentry.source == "int kernel_main() { return 0; }\n");
  // Mentioned, declared, not defined.
  CHECK(llm::extract_kernel("```c\nint forge_kernel(const forge_call* c);\n```").status ==
        Extracted::Status::NoEntry);
  CHECK(llm::extract_kernel("I cannot help with that.").status == Extracted::Status::NoCode);
}

TEST_CASE("the idea: the first sentence of the prose before the code, bounded") {
  CHECK(llm::idea_of("**Idea:** fuse the max and sum passes with an online rescale, e.g. "
                     "Milakov's trick. Then write once.\n```cpp\nint x;\n```") ==
        "Idea: fuse the max and sum passes with an online rescale, e.g. Milakov's trick.");
  CHECK(llm::idea_of("```cpp\nint x;\n```\nThis is after the code.") == "");
  CHECK(llm::idea_of("## Plan\n\nKeep each row in `L1`\nand use AVX-512") ==
        "Plan Keep each row in L1 and use AVX-512");
  // Cut at a word, unless that loses more than half.
  CHECK(llm::idea_of(std::string(100, 'a') + " " + std::string(300, 'b')) == std::string(100, 'a') + "...");
  CHECK(llm::idea_of(std::string(50, 'a') + " " + std::string(300, 'b')).size() == 160);
  CHECK(llm::idea_of(std::string(400, 'x')).size() == 160);
}

TEST_SUITE_END();
}  // namespace forge
