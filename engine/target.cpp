#include "engine/target.h"

#include <algorithm>
#include <cstdio>
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

const char* selection_name(Selection s) {
  switch (s) {
    case Selection::Selected: return "selected";
    case Selection::View: return "view";
    case Selection::Alloc: return "alloc";
    case Selection::NotAten: return "not_aten";
    case Selection::HostOp: return "host_op";
    case Selection::Transfer: return "transfer";
    case Selection::Random: return "random";
    case Selection::Abi: return "abi";
    case Selection::NotInOps: return "not_in_ops";
    case Selection::BelowMinShare: return "below_min_share";
    case Selection::BeyondTop: return "beyond_top";
    case Selection::NoProposer: return "no_proposer";
  }
  return "unknown";
}

const nlohmann::json& sample_entries(const nlohmann::json& sample) {
  static const nlohmann::json empty = nlohmann::json::array();
  if (sample.is_object() && sample.contains("inputs")) return sample["inputs"];
  return sample.is_array() ? sample : empty;
}

void leave_out(Target& t, Selection reason, std::string why) {
  t.selection = reason;
  t.why = std::move(why);
}

namespace {

// A share as a percentage, three significant digits: "0.0312%", "12.5%", "1%".
std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g%%", share * 100);
  return buf;
}

}  // namespace

std::vector<Target> select_targets(std::vector<Target> all, const TargetSelection& sel,
                                   double total_time_us, std::vector<Target>* left_out) {
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
  int rank = 0;  // among the ops that pass targets.ops and min_share
  for (auto& t : all) {
    if (t.selection == Selection::Selected) {
      bool match = sel.ops.empty();
      // "mean" selects every overload ("mean.dim"); "mean.dim" only that one.
      for (const auto& op : sel.ops)
        match |= t.op == op || t.op.rfind(op + ".", 0) == 0 || t.outer_op == op;
      if (!match)
        leave_out(t, Selection::NotInOps, "targets.ops in forge.yaml does not name " + t.op);
      else if (t.share < sel.min_share)
        leave_out(t, Selection::BelowMinShare, percent(t.share) + " of the model's op time, under targets.min_share (" +
                                                   percent(sel.min_share) + ")");
      else if (++rank > sel.top && sel.top > 0)
        leave_out(t, Selection::BeyondTop, "ranked " + std::to_string(rank) + " by time; targets.top keeps " +
                                               std::to_string(sel.top) + " per model");
    }
    if (t.selection == Selection::Selected)
      out.push_back(std::move(t));
    else if (left_out)
      left_out->push_back(std::move(t));
  }
  return out;
}

const Target& resolve_target(const std::vector<Target>& targets, const std::string& name,
                             const std::vector<Target>& not_selected) {
  std::vector<const Target*> hits;
  for (const auto& t : targets) {
    if (t.id == name) return t;
    if (t.id.rfind(name, 0) == 0) hits.push_back(&t);
  }
  if (hits.size() == 1) return *hits[0];
  if (hits.empty()) {
    std::vector<const Target*> ops;  // captured ops that are no targets, by this name
    for (const auto& t : not_selected) {
      if (t.id == name) {
        ops = {&t};
        break;
      }
      if (t.id.rfind(name, 0) == 0) ops.push_back(&t);
    }
    if (ops.size() == 1)
      throw UsageError("'" + ops[0]->id + "' is not a target (" + selection_name(ops[0]->selection) + "): " +
                       ops[0]->why + "; `forge status --all` lists every captured op");
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
          // "selected" (searched), else the reason it is not and `why` in words.
          {"selection", selection_name(t.selection)},
          {"why", t.why.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.why)},
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
          {"under_compile_why", t.under_compile_why.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.under_compile_why)},
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
