// The worker's case planning (docs/WORKER.md, "Verification cases"): which
// cases verify a candidate, in protocol order: the captured samples, fresh
// random values per seed and range, the size sweep of each varied dim
// (signature_family.vary), the family's specials (-inf rows, NaN, ...) and a
// storage offset. Torch-free: the op's arguments enter as their shapes
// (cases.h passes the op's), so forge's unit tests check the plan directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "evaluator.h"
#include "family_params.h"

namespace forge::worker {

// How the inputs of a case are made.
struct CasePlan {
  enum Kind { Sample, Fresh, Edge, Special } kind = Fresh;
  std::string name;
  int sample = 0;              // Sample
  uint64_t seed = 0;           // Fresh, Edge, Special
  double lo = -3, hi = 3;      // value range (also used when refilling in place)
  int edge_arg = -1;           // Edge
  int edge_dim = 0;
  int64_t edge_size = 0;
  int edge_vary = -1;          // Edge: its index in the family's vary (for pins)
  std::string special;         // Special
  int64_t shift_elems = 0;     // inputs start this many elements past an aligned address
};

// One argument of the op as planning sees it.
struct PlanArg {
  std::string name;
  bool tensor = false;
  std::vector<int64_t> sizes;  // a tensor's
  int64_t elem_bytes = 0;      // a tensor's element size
};

// The plans, in protocol order: samples, fresh seeds x ranges, edge sizes,
// specials, storage offset. Unknown specials and impossible edges are skipped
// with a note. Seeds follow from `seed` and the plan's position.
// sweep_growth: the sweep's cases above the captured size stay within that
// many times the captured tensor's bytes (or 64 MiB); the memory plan lowers
// it for huge calls (memory_plan.h).
std::vector<CasePlan> plan_cases(const std::vector<PlanArg>& args, const json& samples, const Family& family,
                                 uint64_t seed, std::vector<std::string>& notes, double sweep_growth = 4.0);

// The extents a varying dim of `a` is verified at besides the captured one
// (the package trusts the kernel up to the largest; plan_cases says more).
std::vector<int64_t> sweep_sizes(const PlanArg& a, int64_t dim, const std::vector<int64_t>& edge_sizes,
                                 std::vector<std::string>& notes, double growth = 4.0);

// The specials the cases know how to make (cases.cpp, apply_special).
bool known_special(const std::string& name);

}  // namespace forge::worker
