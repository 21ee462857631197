// Prompts from files: the templates live in rules/llm/prompts/ (system.md,
// variant.md, repair.md) with {{name}} placeholders, filled from PromptFacts, so
// a prompt is changed by editing a file (the template text enters the search
// context, so changing it starts the trees over).
//
// A variant prompt carries: the op's semantics (the family.yaml with its comment
// header), the candidate ABI header, the static-check rules, the captured
// signature and its signature family, the device (name, arch, copy ceiling, the
// target's floor and stock time), the parent kernel's source with its measured
// time and % of floor, and the outcomes of its ancestors and failed siblings. A
// repair turn carries the compiler's or verifier's words verbatim, bounded.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "rules/llm/client.h"

namespace forge::llm {

struct PromptTemplates {
  std::string system, variant, repair;
  std::string digest() const;  // of all three
};

// Reads <dir>/{system,variant,repair}.md; throws forge::Error naming a missing file.
PromptTemplates load_prompt_templates(const std::filesystem::path& dir);
std::filesystem::path default_prompts_dir();  // <forge source>/rules/llm/prompts

// Replaces every {{name}} whose name is in `values`; throws forge::Error naming
// a placeholder that has no value (a typo in a template must not reach a model).
std::string render(const std::string& text, const std::map<std::string, std::string>& values);

struct PromptFacts {
  bool cuda = false;
  std::string op, signature, family;
  std::string args, outputs;  // JSON text
  std::string family_yaml, abi_header;
  std::string device_name, arch;
  std::optional<double> ceiling_bytes_per_s;
  double bytes = 0, floor_us = 0, stock_us = 0;  // per call; 0 = unknown
  // The node the variant starts from.
  std::string parent_what;    // "the stock kernel", "strategy rows_3pass {...}", "model variant 2"
  std::string parent_source;  // "" for the stock kernel
  std::optional<double> parent_us, parent_speedup, parent_floor_pct;
  std::string example_source;  // for the root: a verified-style template to learn the ABI from
  std::string history;         // lines: ancestors' and failed siblings' outcomes
  int variant = 0, variants = 1;
};

Request variant_request(const PromptTemplates& t, const PromptFacts& facts);

// `request` continued with the model's `reply` and a repair turn saying
// `problem` with `detail` (kept to about max_chars: head and tail).
Request repair_request(const PromptTemplates& t, Request request, const std::string& reply,
                       const std::string& problem, const std::string& detail,
                       size_t max_chars = 6000);

std::string bounded(const std::string& text, size_t max_chars);

}  // namespace forge::llm
