// The worker's case planning (case_plan.h).
#include "case_plan.h"

#include <algorithm>
#include <cstdio>

#include "compare_rule.h"

namespace forge::worker {

bool known_special(const std::string& s) {
  // Keep in step with apply_special (cases.cpp).
  return s == "neg_inf_row" || s == "pos_inf" || s == "nan" || s == "mostly_neg_inf_row" || s == "causal";
}

// The extents a varying dim is verified at (the package trusts the kernel up
// to the largest): every size 1..64, the powers of two from 128 and one each
// side up to the largest, max(4x the captured extent, 64); the family's own
// edge_sizes too. Sizes whose tensor would exceed max(growth x captured,
// 64 MiB) are left out, so a huge captured slice is not multiplied 64 times.
std::vector<int64_t> sweep_sizes(const PlanArg& a, int64_t dim, const std::vector<int64_t>& edge_sizes,
                                 std::vector<std::string>& notes, double growth) {
  const int64_t captured = a.sizes[static_cast<size_t>(dim)];
  const int64_t elem = a.elem_bytes;
  int64_t numel = 1;
  for (int64_t s : a.sizes) numel *= s;
  const int64_t per_slice = captured > 0 ? numel / captured * elem : elem;
  const int64_t budget =
      std::max<int64_t>(static_cast<int64_t>(growth * static_cast<double>(numel * elem)), int64_t(64) << 20);
  const int64_t largest = std::max<int64_t>(4 * captured, 64);
  std::vector<int64_t> sizes;
  for (int64_t s = 1; s <= 64; ++s) sizes.push_back(s);
  for (int64_t b = 128; b <= largest; b *= 2) {
    sizes.push_back(b - 1);
    sizes.push_back(b);
    if (b + 1 <= largest) sizes.push_back(b + 1);
  }
  sizes.push_back(largest);
  for (int64_t s : edge_sizes) sizes.push_back(s);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<int64_t> kept;
  int64_t dropped = 0;
  for (int64_t s : sizes) {
    if (s == captured || s < 1) continue;  // the captured extent: the samples and fresh cases
    if (s > captured && s * per_slice > budget) {
      ++dropped;
      continue;
    }
    kept.push_back(s);
  }
  if (dropped > 0)
    notes.push_back(a.name + ".size(" + std::to_string(dim) + "): " + std::to_string(dropped) +
                    " sizes above the verification budget left out");
  return kept;
}

std::vector<CasePlan> plan_cases(const std::vector<PlanArg>& args, const json& samples, const Family& family, uint64_t seed,
                                 std::vector<std::string>& notes, double sweep_growth) {
  std::vector<CasePlan> plans;
  uint64_t n = 0;
  auto next_seed = [&]() { return seed * 1000003ull + (++n) * 7919ull; };
  if (samples.is_array())
    for (size_t k = 0; k < samples.size(); ++k) {
      CasePlan p;
      p.kind = CasePlan::Sample;
      p.sample = static_cast<int>(k);
      p.name = "sample " + std::to_string(k);
      p.seed = next_seed();
      p.lo = family.ranges.front().first;
      p.hi = family.ranges.front().second;
      plans.push_back(p);
    }
  for (int s = 0; s < family.seeds; ++s)
    for (const auto& [lo, hi] : family.ranges) {
      CasePlan p;
      p.kind = CasePlan::Fresh;
      p.seed = next_seed();
      p.lo = lo;
      p.hi = hi;
      p.name = "fresh seed=" + std::to_string(s) + " range=[" + number_text(lo) + "," + number_text(hi) + "]";
      plans.push_back(p);
    }
  for (size_t v = 0; v < family.sig.vary.size(); ++v) {
    const auto [arg, dim] = family.sig.vary[v];
    if (arg < 0 || static_cast<size_t>(arg) >= args.size() || !args[arg].tensor) {
      notes.push_back("signature_family.vary: arg " + std::to_string(arg) + " is not a tensor argument; ignored");
      continue;
    }
    int64_t ndim = static_cast<int64_t>(args[arg].sizes.size());
    if (dim < -ndim || dim >= ndim) {
      notes.push_back("signature_family.vary: arg " + std::to_string(arg) + " has no dim " + std::to_string(dim));
      continue;
    }
    for (int64_t size : sweep_sizes(args[arg], dim < 0 ? dim + ndim : dim, family.edge_sizes, notes, sweep_growth)) {
      CasePlan p;
      p.kind = CasePlan::Edge;
      p.seed = next_seed();
      p.lo = family.ranges.front().first;
      p.hi = family.ranges.front().second;
      p.edge_arg = arg;
      p.edge_dim = static_cast<int>(dim < 0 ? dim + ndim : dim);
      p.edge_size = size;
      p.edge_vary = static_cast<int>(v);
      p.name = "edge " + args[arg].name + ".size(" + std::to_string(p.edge_dim) + ")=" + std::to_string(size);
      plans.push_back(p);
    }
  }
  for (const auto& name : family.specials) {
    if (!known_special(name)) {
      notes.push_back("unknown special \"" + name + "\" ignored");
      std::fprintf(stderr, "forge_worker: note: unknown special \"%s\" ignored\n", name.c_str());
      continue;
    }
    CasePlan p;
    p.kind = CasePlan::Special;
    p.special = name;
    p.seed = next_seed();
    p.lo = family.ranges.front().first;
    p.hi = family.ranges.front().second;
    p.name = "special " + name;
    plans.push_back(p);
  }
  // Views a user's program passes: every tensor input one element past an
  // aligned start (x[1:] is contiguous, its data is not 16-byte aligned).
  {
    CasePlan p;
    p.kind = CasePlan::Special;
    p.special = "storage_offset";
    p.shift_elems = 1;
    p.seed = next_seed();
    p.lo = family.ranges.front().first;
    p.hi = family.ranges.front().second;
    p.name = "special storage_offset";
    plans.push_back(p);
  }
  return plans;
}

}  // namespace forge::worker
