#include "rules/llm/prompt.h"

#include <cstdio>

#include "rules/evaluate/family.h"
#include "rules/evaluate/static_check.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/hash.h"

namespace forge::llm {
namespace fs = std::filesystem;

std::string PromptTemplates::digest() const {
  Hasher h;
  h.add("system", system).add("variant", variant).add("repair", repair);
  return h.hex();
}

fs::path default_prompts_dir() { return fs::path(FORGE_SOURCE_DIR) / "rules" / "llm" / "prompts"; }

PromptTemplates load_prompt_templates(const fs::path& dir) {
  PromptTemplates t;
  for (auto [name, out] : {std::pair{"system.md", &t.system}, std::pair{"variant.md", &t.variant},
                           std::pair{"repair.md", &t.repair}})
    if (!read_file(dir / name, out))
      throw Error("cannot read the prompt template " + (dir / name).string());
  return t;
}

std::string render(const std::string& text, const std::map<std::string, std::string>& values) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string::npos) break;
    size_t close = text.find("}}", open);
    if (close == std::string::npos) break;
    const std::string name = text.substr(open + 2, close - open - 2);
    auto it = values.find(name);
    if (it == values.end()) throw Error("prompt template: no value for {{" + name + "}}");
    out += text.substr(pos, open - pos) + it->second;
    pos = close + 2;
  }
  return out + text.substr(pos);
}

std::string bounded(const std::string& text, size_t max_chars) {
  if (text.size() <= max_chars) return text;
  const size_t head = max_chars * 2 / 3, tail = max_chars - head;
  return text.substr(0, head) + "\n[... " + std::to_string(text.size() - head - tail) +
         " characters left out ...]\n" + text.substr(text.size() - tail);
}

namespace {

std::string num(double v, const char* fmt = "%.3g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string device_text(const PromptFacts& f) {
  std::string s = std::string(f.cuda ? "CUDA GPU" : "CPU") + ": " + f.device_name + " (" + f.arch + ")";
  s += f.cuda ? ". Launch on (cudaStream_t)call->stream.\n"
              : ". One thread: compute on the calling thread (no OpenMP).\n";
  if (f.ceiling_bytes_per_s)
    s += "Copy ceiling (read + write, measured here): " + num(*f.ceiling_bytes_per_s / 1e9) +
         " GB/s.\n";
  if (f.bytes > 0) s += "This call moves " + num(f.bytes, "%.0f") + " bytes";
  if (f.floor_us > 0) s += ", so its bandwidth floor is " + num(f.floor_us) + " us";
  if (f.bytes > 0) s += ".\n";
  if (f.stock_us > 0) s += "The stock kernel took " + num(f.stock_us) + " us per call during capture.\n";
  return s;
}

std::string parent_text(const PromptFacts& f) {
  const std::string fence = f.cuda ? "cuda" : "cpp";
  if (f.parent_source.empty()) {
    std::string s = "Start from scratch: the parent is " + f.parent_what + ".\n";
    if (!f.example_source.empty())
      s += "A kernel for this op family from forge's strategy library, showing the ABI in use "
           "(yours should be different and faster):\n\n```" + fence + "\n" + f.example_source +
           "```\n";
    return s;
  }
  std::string s = "The parent is " + f.parent_what + ". Measured:";
  if (f.parent_us) s += " " + num(*f.parent_us) + " us per call,";
  if (f.parent_speedup) s += " " + num(*f.parent_speedup) + "x stock,";
  if (f.parent_floor_pct) s += " " + num(*f.parent_floor_pct) + "% of the bandwidth floor,";
  if (s.back() == ',') s.back() = '.';
  return s + "\n\n```" + fence + "\n" + f.parent_source + "```\n";
}

std::string static_rules_text() {
  std::string s;
  for (const auto& r : static_rules()) s += "- `" + std::string(r.id) + "`: " + r.rationale + "\n";
  return s;
}

}  // namespace

Request variant_request(const PromptTemplates& t, const PromptFacts& f) {
  const std::map<std::string, std::string> v = {
      {"lang", f.cuda ? "CUDA" : "C++ (CPU)"},
      {"fence", f.cuda ? "cuda" : "cpp"},
      {"cuda_headers", f.cuda ? " and the CUDA runtime headers" : ""},
      {"abi_header", f.abi_header},
      {"static_rules", static_rules_text()},
      {"compile_line", f.cuda ? "nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -cudart shared "
                                "-gencode=arch=compute_XX,code=sm_XX -Xlinker -z,defs"
                              : "c++ -O3 -std=c++17 -fPIC -shared -march=native -Wl,-z,defs"},
      {"op", f.op},
      {"signature", f.signature},
      {"args", f.args},
      {"outputs", f.outputs},
      {"family", f.family},
      {"family_yaml", f.family_yaml},
      {"device", device_text(f)},
      {"parent", parent_text(f)},
      {"history", f.history.empty() ? "Nothing yet.\n" : f.history},
      {"variant", std::to_string(f.variant + 1) + " of " + std::to_string(f.variants)},
      {"goal", f.variant == 0 ? "improve on the parent with the most promising idea."
                              : "take a different approach from the earlier variants and the "
                                "failures listed above."},
  };
  Request r;
  r.system = render(t.system, v);
  r.messages.push_back({"user", render(t.variant, v)});
  r.variant = f.variant;
  return r;
}

Request repair_request(const PromptTemplates& t, Request request, const std::string& reply,
                       const std::string& problem, const std::string& detail, size_t max_chars) {
  request.messages.push_back({"assistant", reply});
  request.messages.push_back(
      {"user", render(t.repair, {{"problem", problem}, {"detail", bounded(detail, max_chars)}})});
  return request;
}

}  // namespace forge::llm
