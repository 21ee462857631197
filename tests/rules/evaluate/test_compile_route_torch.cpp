// forge_compile (runtime/autoload/forge_autoload/compile.py) on the CPU: what
// torch.compile traces in place of a captured op. BatchNorm in eval mode runs
// aten::native_batch_norm eagerly (what capture records) but traces to
// _native_batch_norm_legit_no_training. The build finds that spelling by tracing
// the captured call (forge_compile_bench.py's spellings(), run here on the
// entry's signature) and records it in the entry's traced_as; under
// FORGE_COMPILE_POLICY=forge that
// spelling reaches the forged op; under the measured policy it keeps
// Inductor's code (and its fusion with the ops after it). A batch beyond the
// entry's vary_max keeps Inductor's code under either policy. No forge build: a
// hand-written package.json, Inductor's generated code read back. The routing
// asks libforge.so's guard (runtime/package/guard.h), so the library forge
// builds for this torch is loaded; with no package.json beside it, it
// overrides nothing, and the forge op calls stock.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

#include "tests/runtime/package/package_library.h"
#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;

namespace {

const char* kRoute = R"(import json, os, sys, torch, torch.nn as nn, torch.nn.functional as F
from torch._inductor.utils import run_and_get_code
sys.path.insert(0, os.path.join(sys.argv[1], "runtime", "autoload"))
sys.path.insert(0, os.path.join(sys.argv[1], "runtime", "compile_bench"))
from forge_autoload import compile as fc
from forge_compile_bench import spellings

def tensor(name, sizes):
    strides, s = [], 1
    for d in reversed(sizes):
        strides.insert(0, s); s *= d
    return {"type": "Tensor", "name": name, "dtype": "float32", "device": "cpu", "sizes": sizes,
            "strides": strides, "requires_grad": False}
# One entry, as a build writes it: native_batch_norm on [N,3,4,4], N varying,
# verified up to N = 8 (the worker's verify.vary_max).
entry = {"op": "aten::native_batch_norm", "overload": "", "under_compile": "forge", "contiguous": True,
         "vary": [{"arg": 0, "dim": 0}], "vary_max": [8], "pins": [],
         "args": [tensor("input", [2, 3, 4, 4])] +
                 [tensor(n, [3]) for n in ("weight", "bias", "running_mean", "running_var")] +
                 [{"type": "bool", "value": False}, {"type": "float", "value": 0.1},
                  {"type": "float", "value": 1e-5}]}
# The spellings a build records (no under_compile of their own: Inductor's
# code unless forced; assembly.cpp says why).
found, problem = spellings(torch.ops.aten.native_batch_norm.default,
                           [torch.randn(2, 3, 4, 4)] + [torch.rand(3) for _ in range(4)] + [False, 0.1, 1e-5])
print("traced as", found, problem)
entry["traced_as"] = found
json.dump({"entries": [entry]}, open("package.json", "w"))
print("installed", fc.install(os.path.abspath("package.json"), policy=sys.argv[2], library=sys.argv[3]))

torch.manual_seed(0)
def module(c):
    bn = nn.BatchNorm2d(c).eval()
    bn.running_mean.normal_(); bn.running_var.uniform_(0.5, 2); bn.weight.data.normal_(); bn.bias.data.normal_()
    return bn
def ref(bn, x):
    return torch.relu(F.batch_norm(x.double(), bn.running_mean.double(), bn.running_var.double(),
                                   bn.weight.double(), bn.bias.double(), False, 0.1, 1e-5)) * 2
bn3, bn4 = module(3), module(4)
f = torch.compile(lambda t: torch.relu(bn3(t)) * 2)
g = torch.compile(lambda t: torch.relu(bn4(t)) * 2)  # 4 channels: outside the entry
h = torch.compile(lambda t: torch.relu(bn3(t)) * 2, dynamic=False)
with torch.no_grad():
    x, x4 = torch.randn(8, 3, 4, 4), torch.randn(5, 4, 4, 4)  # batch 8 = vary_max: inside the family
    y, code = run_and_get_code(f, x)
    y4, code4 = run_and_get_code(g, x4)
    x9 = torch.randn(9, 3, 4, 4)  # batch 9: beyond what was verified
    y9, code9 = run_and_get_code(h, x9)
calls = [l.strip() for c in code for l in c.splitlines() if "= torch.ops.forge.native_batch_norm" in l]
print("forge calls %d: %s" % (len(calls), calls))
print("forge ops outside the entry", sum(c.count("torch.ops.forge.") for c in code4))
print("forge ops beyond vary_max", sum(c.count("torch.ops.forge.") for c in code9))
err = max((y.double() - ref(bn3, x)).abs().max().item(), (y4.double() - ref(bn4, x4)).abs().max().item(),
          (y9.double() - ref(bn3, x9)).abs().max().item())
print("max error %.3g" % err)
)";

}  // namespace

TEST_SUITE_BEGIN("rules::CompileRouteTorch");

namespace {
// Runs the script under `policy`, each run with a fresh Inductor cache (a
// graph compiled by another run must not answer); its output.
std::string route(const test::TempDir& dir, const std::string& policy, const fs::path& library) {
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  const fs::path cache = dir / ("inductor-" + policy), out = dir / ("out-" + policy + ".txt");
  const std::string cmd = "cd '" + dir.path().string() + "' && TORCHINDUCTOR_CACHE_DIR='" + cache.string() +
                          "' OMP_NUM_THREADS=1 '" + (repo / ".venv/bin/python").string() + "' route.py '" +
                          repo.string() + "' " + policy + " '" + library.string() + "' > '" + out.string() +
                          "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::string text = test::read_text(out);
  if (rc != 0) text += "\nexit status " + std::to_string(rc);
  return text;
}
double max_error(const std::string& out) {
  const auto at = out.find("max error ");
  return at == std::string::npos ? 1e9 : std::stod(out.substr(at + 10));
}
}  // namespace

TEST_CASE("an eval BatchNorm under torch.compile (_native_batch_norm_legit_no_training): forged when forced, Inductor's when measured") {
  FORGE_SKIP_WITHOUT_TORCH();
  std::string why;
  const fs::path library = test::package_library(&why);
  REQUIRE_MESSAGE(!library.empty(), why);
  test::TempDir dir;
  test::write_text(dir / "route.py", kRoute);
  const std::string forced = route(dir, "forge", library);
  INFO(forced);
  CHECK(forced.find("exit status") == std::string::npos);
  CHECK(forced.find("installed ['aten::native_batch_norm.default']") != std::string::npos);
  // The spelling found, its arguments mapped onto the captured op's: training (5) has none.
  CHECK(forced.find("traced as [{'op': 'aten::_native_batch_norm_legit_no_training', 'overload': 'default', "
                    "'args': [0, 1, 2, 3, 4, None, 5, 6]}] None") != std::string::npos);
  // One call, the captured op's eight arguments (training False) in the traced op's place.
  CHECK(forced.find("forge calls 1: [") != std::string::npos);
  CHECK(forced.find(", False, 0.1, 1e-05)']") != std::string::npos);
  CHECK(forced.find("forge ops outside the entry 0") != std::string::npos);
  // A batch larger than the entry's vary_max keeps Inductor's code, even forced.
  CHECK(forced.find("forge ops beyond vary_max 0") != std::string::npos);
  CHECK(max_error(forced) < 1e-4);
  // The entry says under_compile: forge, measured on the op alone; the traced
  // spelling still keeps Inductor's code, which fuses it with the ReLU.
  const std::string measured = route(dir, "measured", library);
  INFO(measured);
  CHECK(measured.find("installed ['aten::native_batch_norm.default']") != std::string::npos);
  CHECK(measured.find("forge calls 0: []") != std::string::npos);
  CHECK(max_error(measured) < 1e-4);
}

TEST_SUITE_END();
}  // namespace forge
