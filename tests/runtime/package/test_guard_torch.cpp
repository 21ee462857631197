// The package guard (runtime/package/guard.h) has one home, and the
// torch.compile routing (runtime/autoload/forge_autoload/compile.py) uses it:
// on each call below, the routing's decision must be the eager override's.
// The eager side is observed, not assumed: a package whose kernel writes 42
// into its output, loaded as forge run loads it, so a call the override took
// returns all 42s. The routing side is compile.py's own path: the guard a
// routed decomposition asks (_inside, on real tensors), and the decomposition
// itself under make_fx on fake tensors, static and symbolic, where a routed
// call leaves torch.ops.forge._softmax in the graph. Each case also has the
// answer the rule gives (signature_family.h): a routing that decided on its
// own and drifted (a bound, a dtype, the layout, grad, the thread count) fails.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "tests/runtime/package/package_library.h"
#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A kernel for _softmax's float32 output: 42 everywhere, so a forged call shows.
const char* kKernel = R"(#include "forge_kernel.h"
int forge_kernel(const forge_call* c) {
  forge_tensor* o = &c->outputs[0];
  int64_t n = 1;
  for (int d = 0; d < o->ndim; ++d) n *= o->sizes[d];
  for (int64_t i = 0; i < n; ++i) ((float*)o->data)[i] = 42.0f;
  return 0;
}
)";

const char* kAgree = R"(import json, os, sys, torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch._inductor.decomposition import decompositions
torch.set_num_threads(1)
pkg = sys.argv[1]
torch.ops.load_library(os.path.join(pkg, "libforge.so"))  # as forge run loads it
sys.path.insert(0, os.path.join(sys.argv[2], "runtime", "autoload"))
from forge_autoload import compile as fc
print("installed", fc.install(os.path.join(pkg, "package.json"), policy="measured"))
entry = json.load(open(os.path.join(pkg, "package.json")))["entries"][0]
guard = fc._Guard(fc._library(os.path.join(pkg, "libforge.so")), entry)

def eager(x, dim):
    y = torch.ops.aten._softmax(x, dim, False)
    return y.numel() > 0 and bool((y.detach() == 42).all())

def traced(x, dim, mode):
    f = lambda t: torch.ops.aten._softmax(t, dim, False)
    return "torch.ops.forge._softmax" in make_fx(f, decomposition_table=decompositions, tracing_mode=mode)(x).code

torch.manual_seed(0)
cases = {
    "inside": (torch.randn(4, 8), 1),
    "at vary_max": (torch.randn(6, 8), 1),
    "just beyond vary_max": (torch.randn(7, 8), 1),
    "empty batch": (torch.randn(0, 8), 1),
    "float64": (torch.randn(4, 8, dtype=torch.float64), 1),
    "bfloat16": (torch.randn(4, 8).bfloat16(), 1),
    "non-contiguous": (torch.randn(8, 4).t(), 1),
    "storage offset": (torch.randn(33)[1:].view(4, 8), 1),  # contiguous: any offset
    "another row length": (torch.randn(4, 9), 1),
    "another dim": (torch.randn(4, 8), 0),
    "requires grad": (torch.randn(4, 8, requires_grad=True), 1),
}
out = {}
for name, (x, dim) in cases.items():
    grad = x.requires_grad
    with torch.enable_grad() if grad else torch.no_grad():
        out[name] = {"eager": eager(x, dim), "guard": guard.inside((x, dim, False)),
                     "fake": traced(x, dim, "fake")}
        if not grad:
            out[name]["symbolic"] = traced(x, dim, "symbolic")
with torch.no_grad():  # grad mode off: a tensor that requires grad is inside
    x = torch.randn(4, 8, requires_grad=True)
    out["requires grad, no_grad"] = {"eager": eager(x, 1), "guard": guard.inside((x, 1, False)),
                                     "fake": traced(x, 1, "fake")}
torch.set_num_threads(2)  # more intra-op threads than stock had (stock_threads 1)
with torch.no_grad():
    x = torch.randn(4, 8)
    out["two threads"] = {"eager": eager(x, 1), "guard": guard.inside((x, 1, False)),
                          "fake": traced(x, 1, "fake"), "verdict": guard.judge((x, 1, False))}
print("RESULT " + json.dumps(out))
)";

// CPU max_pool1d computes inside its CompositeImplicitAutograd kernel when no
// autograd is needed: the override takes that key (runtime/package/stock.h).
// Each call's result against max_pool2d's (another op) on the same windows.
const char* kComposite = R"(import json, os, sys, torch
import torch.nn.functional as F
torch.set_num_threads(1)
torch.ops.load_library(os.path.join(sys.argv[1], "libforge.so"))
torch.manual_seed(0)
x = torch.randn(2, 4, 16)
pool = lambda t: F.max_pool1d(t, 2)
ref = lambda t: F.max_pool2d(t.unsqueeze(-2), (1, 2)).squeeze(-2)
forged = lambda y: bool((y == 42).all())
out = {}
with torch.no_grad():
    out["no_grad"] = forged(pool(x))
    out["other shape"] = torch.equal(pool(x[:, :, :10]), ref(x[:, :, :10]))
    out["compiled"] = torch.equal(torch.compile(pool)(x), ref(x))
    out["compiled, dynamic"] = torch.equal(torch.compile(pool, dynamic=True)(x[:, :, :12]), ref(x[:, :, :12]))
    out["vmap"] = torch.equal(torch.vmap(pool)(x.unsqueeze(0).expand(3, -1, -1, -1)), ref(x).expand(3, -1, -1, -1))
    out["meta"] = pool(x.to("meta")).shape == ref(x).shape
g, h = x.clone().requires_grad_(), x.clone().requires_grad_()
y = pool(g)
y.sum().backward()
ref(h).sum().backward()
out["grad values"] = torch.equal(y.detach(), ref(x))
out["grad"] = torch.equal(g.grad, h.grad)
import torch.autograd.forward_ad as fwAD
t = torch.randn_like(x)
with fwAD.dual_level():
    tangent = lambda f: fwAD.unpack_dual(f(fwAD.make_dual(x, t))).tangent
    out["forward AD"] = torch.equal(tangent(pool), tangent(ref))
print("RESULT " + json.dumps(out))
)";

const fs::path kRepo = fs::path(FORGE_TEST_DIR).parent_path();

// dir/package as forge run loads it: libforge.so, the 42 kernel, and a
// package.json with the one CPU entry.
fs::path package_with(const test::TempDir& dir, const json& entry) {
  std::string why;
  const fs::path lib = test::package_library(&why);
  REQUIRE_MESSAGE(!lib.empty(), why);
  const fs::path pkg = dir / "package";
  fs::create_directories(pkg / "kernels");
  fs::copy_file(lib, pkg / "libforge.so");
  test::write_text(dir / "k.c", kKernel);
  const std::string cc = "cc -shared -fPIC -O1 -I'" + (kRepo / "runtime" / "abi").string() + "' '" +
                         (dir / "k.c").string() + "' -o '" + (pkg / "kernels" / "k.so").string() + "'";
  REQUIRE(std::system(cc.c_str()) == 0);
  test::write_text(pkg / "package.json", json{{"backend", "cpu"}, {"entries", {entry}}}.dump(1));
  return pkg;
}

// Runs `script` with the venv's python and `args` in dir; REQUIREs exit 0 and
// returns its output.
std::string run_script(const test::TempDir& dir, const char* script, const std::string& args) {
  test::write_text(dir / "script.py", script);
  const fs::path out = dir / "out.txt";
  const std::string cmd = "cd '" + dir.path().string() + "' && TORCHINDUCTOR_CACHE_DIR='" +
                          (dir / "inductor").string() + "' '" + (kRepo / ".venv/bin/python").string() +
                          "' script.py " + args + " > '" + out.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string text = test::read_text(out);
  INFO(text);
  REQUIRE(rc == 0);
  return text;
}

// The JSON the script printed after "RESULT ".
json result_of(const std::string& text) {
  const auto at = text.find("RESULT ");
  REQUIRE_MESSAGE(at != std::string::npos, text);
  return json::parse(text.substr(at + 7, text.find('\n', at) - at - 7));
}

}  // namespace

TEST_SUITE_BEGIN("runtime::PackageGuardTorch");

TEST_CASE("compile.py routes exactly the calls libforge.so's override takes: one guard, in C++") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  // _softmax(self, dim, half_to_float) on [N, 8] float32 rows, N varying up
  // to the verified 6, a CPU kernel that beat stock at one thread.
  const json entry = {
      {"target", "app/_softmax"},
      {"op", "aten::_softmax"},
      {"overload", ""},
      {"args", {{{"type", "Tensor"}, {"dtype", "float32"}, {"device", "cpu"}, {"sizes", {4, 8}}, {"strides", {8, 1}}},
                {{"type", "int"}, {"value", 1}},
                {{"type", "bool"}, {"value", false}}}},
      {"outputs", {{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {4, 8}}, {"strides", {8, 1}}}}},
      {"vary", {{{"arg", 0}, {"dim", 0}}}},
      {"vary_max", {6}},
      {"pins", json::array()},
      {"contiguous", true},
      {"vary_outputs", {0}},
      {"stock_threads", 1},
      {"kernel", "kernels/k.so"},
      {"under_compile", "forge"}};
  const fs::path pkg = package_with(dir, entry);
  const std::string text = run_script(dir, kAgree, "'" + pkg.string() + "' '" + kRepo.string() + "'");
  CHECK(text.find("installed ['aten::_softmax.default']") != std::string::npos);
  const json got = result_of(text);
  const std::map<std::string, bool> expected = {
      {"inside", true},           {"at vary_max", true},      {"just beyond vary_max", false},
      {"empty batch", false},     {"float64", false},         {"bfloat16", false},
      {"non-contiguous", false},  {"storage offset", true},  {"another row length", false},
      {"another dim", false},     {"requires grad", false},   {"requires grad, no_grad", true},
      {"two threads", false}};
  REQUIRE(got.size() == expected.size());
  for (const auto& [name, inside] : expected) {
    INFO(name << ": " << got[name].dump());
    REQUIRE(got.contains(name));
    // The eager override (the rule as every dispatched call meets it) ...
    CHECK(got[name]["eager"].get<bool>() == inside);
    // ... and the routing, asked directly and through the decomposition on fake tensors.
    CHECK(got[name]["guard"].get<bool>() == inside);
    CHECK(got[name]["fake"].get<bool>() == inside);
    if (got[name].contains("symbolic")) CHECK(got[name]["symbolic"].get<bool>() == inside);
  }
  CHECK(got["two threads"]["verdict"] == 2);  // inside but for the thread count
}

TEST_CASE("an op computed inside its CompositeImplicitAutograd kernel is overridden there, plain calls only") {
  FORGE_SKIP_WITHOUT_TORCH();
  test::TempDir dir;
  // max_pool1d(self, kernel_size, stride, padding, dilation, ceil_mode) on [2, 4, 16].
  const json entry = {
      {"target", "app/max_pool1d"},
      {"op", "aten::max_pool1d"},
      {"overload", ""},
      {"args", {{{"type", "Tensor"}, {"dtype", "float32"}, {"device", "cpu"}, {"sizes", {2, 4, 16}}, {"strides", {64, 16, 1}}},
                {{"type", "int[]"}, {"value", {2}}},
                {{"type", "int[]"}, {"value", json::array()}},
                {{"type", "int[]"}, {"value", {0}}},
                {{"type", "int[]"}, {"value", {1}}},
                {{"type", "bool"}, {"value", false}}}},
      {"outputs", {{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {2, 4, 8}}, {"strides", {32, 8, 1}}}}},
      {"vary", json::array()},
      {"pins", json::array()},
      {"contiguous", true},
      {"vary_outputs", json::array()},
      {"stock_threads", 1},
      {"kernel", "kernels/k.so"},
      {"under_compile", "inductor"}};
  const fs::path pkg = package_with(dir, entry);
  const json got = result_of(run_script(dir, kComposite, "'" + pkg.string() + "'"));
  // A plain call in the signature runs the kernel (42s); every other call runs
  // the composite, which decomposes for autograd (both modes), tracing
  // (FakeTensor, symbolic sizes too), vmap and meta tensors as before.
  for (const char* k : {"no_grad", "other shape", "compiled", "compiled, dynamic", "vmap", "meta", "grad values", "grad",
                        "forward AD"})
    CHECK_MESSAGE(got.value(k, false), k);
}

TEST_SUITE_END();
}  // namespace forge
