// Targets: one per (model, backend op, signature), the unit that search,
// history and packaging work on. Its id is "<model>/<op>/<sig>" where <sig> is
// the first 6 hex digits of sha256(signature text); the readable signature is
// shown beside it. Any unique prefix of an id names it on the command line.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/manifest.h"

namespace forge {

// A verified candidate that beat stock, as the search left it: enough to read
// its source and evaluation record back from the store (history, package).
struct KernelRecord {
  int iteration = 0;          // the search iteration that evaluated it
  int node = 0, parent = 0;   // tree node ids (0 = the stock root)
  std::string strategy;       // strategy name; params as JSON
  nlohmann::json params;
  std::string proposer = "strategy";  // "strategy" | "llm": what produced it
  std::string file;           // candidate file name: "rows_3pass-ISA0.cpp"
  std::string source;         // store object digest of the source text
  std::string evaluation;     // store object digest of the evaluation record
  double speedup_eager = 0;
  std::string race;           // store object digest of its race against the tip, "" when none
};

// How a kernel is named in reports, the package and the history: "llm variant
// k" for a model's (k counted from 1, as its prompt counts it; the journal's
// params keep the 0-based index), "<strategy> <params>" for the library's.
std::string kernel_label(const std::string& proposer, const std::string& strategy, const nlohmann::json& params);

// Whether the build searches a captured op and, if not, why. Every captured
// op gets one: the capture stage (rules/capture/selection.h: what can be no
// target at all; select_targets below: forge.yaml's targets:) and the search
// stage (rules/search/not_searched.h: no proposer applies) set them.
// Reports carry the name (selection_name) and Target::why, in words.
enum class Selection {
  Selected,       // searched by `forge build` (`forge capture` stops before search)
  View,           // a view or alias: no kernel runs
  Alloc,          // an allocation (empty, empty_strided)
  NotAten,        // a custom (non-ATen) op: forge overrides ATen kernels
  HostOp,         // ran on the CPU in a CUDA model: set-up, data preparation
  Transfer,       // copies between host and device: bound by the link
  Random,         // draws random numbers: no stock result to verify against
  Abi,            // an argument or output the candidate ABI cannot carry
  NotInOps,       // forge.yaml's targets.ops does not name it
  BelowMinShare,  // under targets.min_share of the model's op time
  BeyondTop,      // ranked after targets.top
  NoProposer,     // no strategy applies at this shape, and no model proposes
};
const char* selection_name(Selection s);  // "selected", "below_min_share", ...

struct Target {
  std::string id;
  std::string model;
  std::string op;         // backend op with overload: "_softmax", "mean.dim"
  std::string outer_op;   // what the user called: "softmax", "adaptive_avg_pool2d"
  std::string signature;  // readable: "_softmax(f32[64,1000]{1000,1}, -1, False)"
  long calls = 0;
  double time_us = 0;     // measured op time over the captured run
  double share = 0;       // of the model's backend-op time
  double bytes = 0;       // moved per call: inputs read once, outputs written once
  double floor_us = 0;    // bytes / copy ceiling, 0 when the ceiling is unknown
  double amdahl = 1;      // best end-to-end speedup replacing this op could give (inf: all of it)
  int samples = 0;        // calls whose input values were saved
  nlohmann::json args;    // the capture's argument records
  nlohmann::json outputs; // the capture's records of what the op returned
  nlohmann::json sample_inputs;  // [[{digest, dtype, sizes, strides}...], ...]
  // A chain target's definition (rules/capture/chain_target.h), which the
  // worker registers as the op forge_chain::<...>; null for one ATen op.
  nlohmann::json chain;
  Selection selection = Selection::Selected;
  std::string why;  // why it is not searched, in words; "" when selected
  // Filled by later stages (null in JSON until measured).
  int iterations = 0;
  int tree_depth = 0;                 // the search tree's deepest node (the root's children: 1)
  std::optional<int> best_iteration;  // the iteration, from 1, that found the best accepted kernel
  int verified = 0;  // candidates that passed verification, faster or not
  int accepted = 0;  // verified and faster than stock
  std::vector<KernelRecord> kernels;  // accepted candidates, in iteration order
  // Index into `kernels` of the one the target ships, reports and compares
  // with Inductor (rules/improvement.h: the tip of its improvement chain); set by
  // the search, none when no kernel was accepted or a record is missing.
  std::optional<size_t> shipped;
  std::map<std::string, int> outcomes;  // iterations by outcome: "ok", "not_faster", "wrong_result", ...
  // Iterations that did not verify, by their reason's first line ("timing_mismatch: ..."),
  // so a report says why a candidate failed, not only the coarse outcome.
  std::map<std::string, int> rejections;
  // {evaluations, compile, verify, bench, worker}: each stage's seconds summed
  // over the evaluations as first run (ahead compiles counted as if serial).
  nlohmann::json stage_seconds;
  std::optional<double> best_speedup_eager, best_speedup_compile, floor_pct;
  // The best kernel's speedup over eager with hot inputs (no cache flush, as
  // in a model): reported beside the cold figure the search judges by.
  std::optional<double> best_hot_speedup_eager;
  std::optional<double> compile_us;  // torch.compile's median for this op (the better mode)
  std::string compile_mode;          // "default" | "max-autotune-no-cudagraphs"
  std::optional<double> compile_over_eager;  // Inductor's median / stock's, same helper run
  // Which kernel compiled graphs call for this op ("forge" when the shipped
  // kernel beat Inductor's by more than both spreads, else "inductor"); "" unknown.
  std::string under_compile;
  // Why compiled graphs keep Inductor's code where the op comparison chose
  // forge: the model's compiled run was slower with the routes (rules/package).
  std::string under_compile_why;
  // Other ops torch.compile's front end traces this op to, each with its
  // arguments mapped onto this op's (forge_compile_bench.py, spellings());
  // the package routes them too (docs/PACKAGE.md, "Under torch.compile").
  nlohmann::json traced_as = nlohmann::json::array();
  std::string best_strategy;  // "rows_3pass {\"VEC\":8}" of the best accepted kernel
  std::string best_proposer;  // "strategy" | "llm": what produced it
  nlohmann::json llm;         // the model's token/cost ledger for this target; null without one
};

std::string signature_hash(const std::string& signature);
std::string make_target_id(const std::string& model, const std::string& op,
                           const std::string& signature);

// Per-arg entries of one of Target::sample_inputs: the capture's
// {"inputs": [...]} or a bare list.
const nlohmann::json& sample_entries(const nlohmann::json& sample);

// Records that `t` is not searched, and why.
void leave_out(Target& t, Selection reason, std::string why);

// Ranks one model's targets by time (descending) and applies the manifest's
// selection (ops list, top-N, minimum share). Shares are of `total_time_us` (the
// model's whole backend-op time, views included; 0 = the sum over `all`) and are
// computed before selection. A target already left out (a view, a random-number
// op, ...) keeps its reason and takes no place in the top N. The rest left out
// go to `*left_out` (when given), ranked, each with its reason.
std::vector<Target> select_targets(std::vector<Target> all, const TargetSelection& sel,
                                   double total_time_us = 0, std::vector<Target>* left_out = nullptr);

// Resolves a command-line name (full id or unique prefix) against `targets`.
// Throws UsageError naming the candidates when ambiguous or unknown; when it
// names one of `not_selected` instead, the error says why that op is no target.
const Target& resolve_target(const std::vector<Target>& targets, const std::string& name,
                             const std::vector<Target>& not_selected = {});

nlohmann::json target_json(const Target& t);

}  // namespace forge
