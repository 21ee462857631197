// Prompts from files: the templates live in rules/llm/prompts/ (system.md,
// variant.md, repair.md) with {{name}} placeholders, filled from PromptFacts, so
// a prompt is changed by editing a file (the template text enters the search
// context, so changing it starts the trees over).
//
// A variant prompt carries: the candidate ABI header (its file comment left
// out), the static-check rules of the target's backend, how the benchmark
// times and what the reward and the shipping rule are, the captured signature,
// the op family's file (its leading comment and keys; other comments and other
// dtypes' lines left out), the device's facts (ISA, cores, caches; SMs, L2,
// shared memory; the measured copy ceiling), the stock time as the benchmark
// measured it (else the capture's, labelled so), the parent kernel with its
// figures and their spreads, the outcomes and one-line ideas of what was tried
// around here, and the fastest kernels elsewhere in the tree. At the root a
// library kernel is shown, trimmed (trim_example). A repair turn carries the
// compiler's or verifier's words verbatim, bounded.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

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

// A median and its spread (interquartile range), microseconds.
struct Timing {
  double median = 0, spread = 0;
};

struct PromptFacts {
  bool cuda = false;
  std::string op, signature;
  std::string family;  // where the family comes from: "targets/softmax/family.yaml", or derived
  std::string args, outputs;  // JSON text
  std::string family_yaml, abi_header;
  unsigned dtypes = 0;  // 1 << forge_dtype of every float tensor (FORGE_DTYPES); 0 = unknown
  std::string device_name, arch;
  std::string device_facts;      // DeviceFacts::describe()
  std::vector<std::string> isa;  // the CPU's ISA extensions (DeviceFacts::isa)
  std::optional<double> ceiling_bytes_per_s;
  double bytes = 0, floor_us = 0;  // per call; 0 = unknown
  // Stock as the benchmark measured it (cold median and IQR), and where that
  // figure comes from ("the parent's evaluation", "node 3's evaluation").
  std::optional<Timing> stock;
  std::string stock_from;
  int stock_threads = 0;   // the stock CPU kernel's threads in that benchmark; 0 = unknown
  double capture_us = 0;   // per call during capture; shown only without `stock`
  // The node the variant starts from.
  std::string parent_what;    // "the stock kernel", "strategy rows_3pass {...}", "model variant 2"
  std::string parent_source;  // "" for the stock kernel
  std::optional<Timing> parent;
  std::optional<double> parent_speedup, parent_floor_pct, parent_hot_speedup;
  std::string example_source;  // for the root: a library kernel to learn the ABI from
  std::string history;         // lines: ancestors' and siblings' outcomes and ideas
  std::string elsewhere;       // lines: the fastest verified kernels off the path
  std::string elsewhere_what, elsewhere_source;  // the fastest of them, when it beats the parent
  int variant = 0, variants = 1;
};

Request variant_request(const PromptTemplates& t, const PromptFacts& facts);

// `request` continued with the model's `reply` and a repair turn saying
// `problem` with `detail` (kept to about max_chars: head and tail).
Request repair_request(const PromptTemplates& t, Request request, const std::string& reply,
                       const std::string& problem, const std::string& detail,
                       size_t max_chars = 6000);

std::string bounded(const std::string& text, size_t max_chars);

// A library kernel cut down for a prompt, still compiling to the same code for
// the target's dtypes on this device: #if groups whose condition is known
// resolved (FORGE_DTYPES = `dtypes`, FORGE_P_* and macros the file defines,
// the ISA macros -march=native defines from `isa`; anything else kept as is),
// comments dropped except the first paragraph of the first block comment,
// definitions at file or namespace level whose first line names a 16-bit
// storage type the target does not use (bf16, f16, __half, __nv_bfloat16)
// dropped, then functions nothing else names, blank lines dropped.
std::string trim_example(const std::string& source, unsigned dtypes,
                         const std::vector<std::string>& isa);

// family.yaml for a prompt: its leading comment and every key, other comment
// lines dropped, and per-dtype lines ("  bfloat16: {...}") of dtypes outside
// `dtypes` dropped (all kept when dtypes is 0).
std::string trim_family_yaml(const std::string& yaml, unsigned dtypes);

}  // namespace forge::llm
