// The torch.compile baseline of each searched target: Inductor's code for the
// same op on the same captured inputs, in `default` and
// `max-autotune-no-cudagraphs` modes (on the CPU `default` alone unless the
// op could be a GEMM: there both generate the same code), timed by a Python
// helper (runtime/compile_bench/forge_compile_bench.py, one process per
// build) with the worker's method; the better mode is "compile". One cached
// step per target (op, signature, inputs, device, toolchain, helper, modes).
// Sets Target::compile_us and, for targets with an accepted kernel,
// best_speedup_compile = the kernel's speedup over stock
// (worker) times Inductor's time over stock (helper, same process). The same
// helper run traces the op under torch.compile's front end and reports the
// other ops it becomes (Target::traced_as) for the package's routing.
#pragma once

#include "engine/build.h"
#include "rules/evaluate/worker_client.h"

namespace forge {

// What a reply of the helper (its --serve mode) means for the build: its
// result (status "ok") when Inductor compiled the op in some mode; status "ok"
// without `compile_us` but with `error` when Inductor compiled it in neither
// mode (a finding about Inductor that leaves the target without a compile
// baseline, not a failed build), and the same when the helper ran past its
// time limit; a failed record when the helper crashed, garbled its reply or
// raised on the target.
nlohmann::json helper_record(const WorkerReply& r);

// The modes Inductor is timed in for `t` on `backend` ("cpu" or "cuda").
std::vector<std::string> baseline_modes(const std::string& backend, const Target& t);

class CompileBaselineRule : public Rule {
 public:
  std::string name() const override { return "compile_baseline"; }
  void apply(BuildContext& ctx) override;
};

}  // namespace forge
