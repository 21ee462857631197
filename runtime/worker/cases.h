// The worker's cases (docs/WORKER.md, "Verification cases"): the plans
// (case_plan.h: the captured samples, fresh random values, the size sweep of
// each varied dim, the specials and the storage offset) for the op's
// arguments, and each case's inputs allocated (abi_views.h) and filled. Part
// of op_args.h.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "abi_views.h"
#include "case_plan.h"
#include "evaluator.h"
#include "memory_plan.h"
#include "op_spec.h"

namespace forge::worker {

struct Case {
  CasePlan plan;
  std::vector<ArgSpec> specs;      // the args of this case (edge cases change sizes)
  std::vector<Buffer> buffers;     // per arg; t undefined for non-tensor args
  std::vector<c10::IValue> args;   // the boxed arguments, tensors from buffers
  int64_t guard = kGuardBytes;     // guard bytes of its buffers (outputs too)
  // Per tensor argument, where its values came from: "captured" (the
  // sample's file), "captured (tiled from N of M elements)" (a partial
  // sample's block, repeated: runtime/common/sample_part.h) or "fresh"
  // (random in the plan's range).
  std::vector<std::string> origin;
};

// The plans of case_plan.h for the op's arguments.
std::vector<CasePlan> plan_cases(const OpSpec& spec, const json& samples, const Family& family, uint64_t seed,
                                 std::vector<std::string>& notes, double sweep_growth = 4.0);

// The value range of every integer tensor argument over the captured samples,
// into family.arg_int_range ([min, max + 1)); arguments without a sample keep
// the family's int_range. A partial sample's range is the one the capture
// took over the whole tensor ("min", "max"), not its stored block's.
void sample_int_ranges(const OpSpec& spec, const json& samples, const std::string& samples_dir, Family& family);

// The captured call's bytes, for the memory plan (memory_plan.h): its tensor
// inputs, its outputs (the stock kernel on meta tensors; the inputs' bytes
// where the op has no meta kernel) and both in float64.
MemoryNeeds memory_needs(const OpSpec& spec);

// Allocates (guarded or not) and fills the inputs of a plan.
Case make_case(const OpSpec& spec, const CasePlan& plan, const json& samples, const std::string& samples_dir,
               const Family& family, bool guarded);

// Fills every tensor input of `c` again in place (same addresses) with fresh
// values of the plan's range.
void refill_in_place(Case& c, const Family& family, uint64_t seed);

}  // namespace forge::worker
