// The improvement rule, in one place: which kernels of a target form its
// improvement chain, whose tip is what ships. Stage-neutral: search (the
// target's figures and its reward), history (the commits), package (what
// ships) and serve/ (the GUI's progress plot) include this header, not each
// other.
//
// The rule (docs/ARCHITECTURE.md, "Which kernel ships"): the first kernel
// faster than stock starts the chain. A later kernel whose median beats the
// tip's is raced against the tip (rules/evaluate/race.h): both evaluated
// again in alternation, a fixed number of rounds each, and the challenger
// joins the chain when the race's fixed-size test (decide_race) says it is
// faster by at least the stated minimum effect. The race's record is kept,
// so a build that evaluates nothing reads the same decision. Kernels from
// before races existed (no race record) keep the old rule: the median beats
// the tip's by more than both spreads.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/target.h"
#include "store/store.h"

namespace forge {

struct BenchTime {
  double median = 0, spread = 0;  // microseconds; spread = interquartile range
};

// A kernel's time from its evaluation record (bench.candidate_us).
BenchTime candidate_time(const nlohmann::json& evaluation);

// The fixed-size race test. Each round gives one time ratio per contender
// (kernel / stock, both timed in the same evaluation, so load that comes and
// goes between evaluations cancels). The challenger wins when the exact
// one-sided Mann-Whitney test puts its ratios below the tip's at level
// `alpha` AND its median ratio is at least `min_effect` below the tip's.
// Neither condition alone: the test keeps noise from shipping, the effect
// keeps a significant but negligible gain from churning the history.
struct RaceRule {
  int rounds = 6;           // evaluations per contender
  double min_effect = 0.05; // 5%: the challenger's median ratio <= 0.95 x the tip's
  double alpha = 0.05;
  nlohmann::json to_json() const;
};

struct RaceDecision {
  bool challenger_wins = false;
  double effect = 0;   // 1 - median(challenger) / median(tip)
  double p = 1;        // exact one-sided p-value of the rank test
  double u = 0;        // pairs (tip, challenger) where the challenger is not faster (ties 1/2)
  std::string why;     // one line
};

RaceDecision decide_race(const std::vector<double>& tip, const std::vector<double>& challenger,
                         const RaceRule& rule);

// One verified-and-faster-than-stock kernel, in iteration order.
struct ChainEntry {
  std::string evaluation;  // digest of its evaluation record
  BenchTime time;
  nlohmann::json race;     // its race record (rules/evaluate/race.h), or null
};

// Indices into `kernels` of the improvement chain (the rule above).
std::vector<size_t> improvement_chain(const std::vector<ChainEntry>& kernels);

// The chain entry of a kernel from the store: its evaluation record (returned
// through `record`) and its race record. False when the evaluation record is
// missing (a missing race record reads as no race).
bool load_chain_entry(store::Store& store, const std::string& evaluation, const std::string& race,
                      ChainEntry* entry, nlohmann::json* record);

// The kernel a target ships, reports and is compared with Inductor by: the
// tip of its improvement chain, the last commit of its history. Reads each
// kernel's evaluation record into `records` (in t.kernels' order); nullopt
// when the target has no kernel or a record is missing from the store.
std::optional<size_t> shipped_kernel_index(store::Store& store, const Target& t, std::vector<nlohmann::json>* records);

}  // namespace forge
