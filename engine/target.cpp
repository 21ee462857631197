#include "engine/target.h"

#include <algorithm>
#include <limits>

#include "util/error.h"
#include "util/hash.h"
#include "util/strings.h"

namespace forge {

std::string signature_hash(const std::string& signature) {
  return sha256_hex(signature).substr(0, 6);
}

std::string make_target_id(const std::string& model, const std::string& op,
                           const std::string& signature) {
  return model + "/" + op + "/" + signature_hash(signature);
}

std::vector<Target> select_targets(std::vector<Target> all, const TargetSelection& sel,
                                   double total_time_us) {
  double total = total_time_us;
  if (total <= 0)
    for (const auto& t : all) total += t.time_us;
  for (auto& t : all) {
    t.share = total > 0 ? t.time_us / total : 0;
    // Replacing an op with a free one saves at most its share (Amdahl); a share of 1 is unbounded.
    t.amdahl = t.share < 1 ? 1.0 / (1.0 - t.share) : std::numeric_limits<double>::infinity();
  }
  std::stable_sort(all.begin(), all.end(), [](const Target& a, const Target& b) {
    if (a.time_us != b.time_us) return a.time_us > b.time_us;
    return a.id < b.id;  // deterministic order for ties
  });
  std::vector<Target> out;
  for (auto& t : all) {
    if (!sel.ops.empty()) {
      // "mean" selects every overload ("mean.dim"); "mean.dim" only that one.
      bool match = false;
      for (const auto& op : sel.ops)
        match |= t.op == op || t.op.rfind(op + ".", 0) == 0 || t.outer_op == op;
      if (!match) continue;
    }
    if (t.share < sel.min_share) continue;
    if (sel.top > 0 && static_cast<int>(out.size()) >= sel.top) break;
    out.push_back(std::move(t));
  }
  return out;
}

const Target& resolve_target(const std::vector<Target>& targets, const std::string& name) {
  std::vector<const Target*> hits;
  for (const auto& t : targets) {
    if (t.id == name) return t;
    if (t.id.rfind(name, 0) == 0) hits.push_back(&t);
  }
  if (hits.size() == 1) return *hits[0];
  if (hits.empty()) {
    std::vector<std::string> ids;
    for (const auto& t : targets) ids.push_back(t.id);
    std::string near = closest_match(name, ids, 3);
    throw UsageError("unknown target '" + name + "'" +
                     (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                     "; `forge status` lists them");
  }
  std::string msg = "target '" + name + "' is ambiguous:";
  for (const auto* t : hits) msg += " " + t->id;
  throw UsageError(msg);
}

std::string kernel_label(const std::string& proposer, const std::string& strategy, const nlohmann::json& params) {
  if (proposer == "llm")
    return "llm variant " + std::to_string((params.is_object() ? params.value("variant", 0) : 0) + 1);
  return strategy + " " + params.dump();
}

nlohmann::json target_json(const Target& t) {
  auto opt = [](const std::optional<double>& v) -> nlohmann::json {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  return {{"id", t.id},
          {"model", t.model},
          {"op", t.op},
          {"outer_op", t.outer_op},
          {"signature", t.signature},
          {"calls", t.calls},
          {"time_us", t.time_us},
          {"share", t.share},
          {"bytes", t.bytes},
          {"floor_us", t.floor_us > 0 ? nlohmann::json(t.floor_us) : nlohmann::json(nullptr)},
          {"amdahl_max_speedup", t.amdahl},
          {"samples", t.samples},
          {"iterations", t.iterations},
          {"tree_depth", t.tree_depth},
          {"best_iteration", t.best_iteration ? nlohmann::json(*t.best_iteration) : nlohmann::json(nullptr)},
          {"verified", t.verified},
          {"accepted", t.accepted},
          {"outcomes", t.outcomes},
          {"rejections", t.rejections},
          {"stage_seconds", t.stage_seconds},
          {"best_speedup_eager", opt(t.best_speedup_eager)},
          {"best_hot_speedup_eager", opt(t.best_hot_speedup_eager)},
          {"best_speedup_compile", opt(t.best_speedup_compile)},
          {"floor_pct", opt(t.floor_pct)},
          {"compile_us", opt(t.compile_us)},
          {"compile_over_eager", opt(t.compile_over_eager)},
          {"compile_mode", t.compile_mode.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.compile_mode)},
          {"under_compile", t.under_compile.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.under_compile)},
          {"best_strategy", t.best_strategy.empty() ? nlohmann::json(nullptr)
                                                    : nlohmann::json(t.best_strategy)},
          {"best_proposer", t.best_proposer.empty() ? nlohmann::json(nullptr)
                                                    : nlohmann::json(t.best_proposer)},
          // The shipped kernel's source: a store object digest (.forge/objects).
          {"best_source", t.shipped && *t.shipped < t.kernels.size() ? nlohmann::json(t.kernels[*t.shipped].source)
                                                                     : nlohmann::json(nullptr)},
          {"llm", t.llm}};
}

}  // namespace forge
