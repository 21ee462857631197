// The worker's case planning: which cases verify a candidate and how their
// inputs are made (docs/WORKER.md, "Verification cases"): the captured
// samples, fresh random values, the size sweep of each varied dim, the
// specials (-inf rows, NaN, ...) and the storage offset; each case's inputs
// allocated (abi_views.h) and filled. Part of op_args.h.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "abi_views.h"
#include "evaluator.h"
#include "op_spec.h"

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
  int edge_vary = -1;          // Edge: its index in Family::vary (for pins)
  std::string special;         // Special
  int64_t shift_elems = 0;     // inputs start this many elements past an aligned address
};

struct Case {
  CasePlan plan;
  std::vector<ArgSpec> specs;      // the args of this case (edge cases change sizes)
  std::vector<Buffer> buffers;     // per arg; t undefined for non-tensor args
  std::vector<c10::IValue> args;   // the boxed arguments, tensors from buffers
  int64_t guard = kGuardBytes;     // guard bytes of its buffers (outputs too)
};

// The plans, in protocol order: samples, fresh seeds x ranges, edge sizes,
// specials. Unknown specials and impossible edges are skipped with a note.
std::vector<CasePlan> plan_cases(const OpSpec& spec, const json& samples, const Family& family, uint64_t seed,
                                 std::vector<std::string>& notes);

// Allocates (guarded or not) and fills the inputs of a plan.
Case make_case(const OpSpec& spec, const CasePlan& plan, const json& samples, const std::string& samples_dir,
               const Family& family, bool guarded);

// Fills every tensor input of `c` again in place (same addresses) with fresh
// values of the plan's range.
void refill_in_place(Case& c, const Family& family, uint64_t seed);

}  // namespace forge::worker
