// Forged kernels reached inside torch.compile'd graphs of a UNet-like block
// (GroupNorm + SiLU + conv, attention softmax) and a ViT-like block
// (LayerNorm, attention softmax, tanh GELU), on the CPU: the package a build
// writes for them, by hand. Its entries are the eager calls of
// native_group_norm, _softmax, native_layer_norm and gelu (recorded as the
// capture records them), each with the spellings the build finds by tracing
// the call (forge_compile_bench.py's spellings(): none other for these four,
// so compiled graphs spell them as eager code does) and a float32 kernel of
// its own. Under the measured choice (every entry says "forge") each compiled
// call reaches its forged kernel, counted by libforge.so's per-entry counters
// (FORGE_PACKAGE_REPORT, what `forge run` lists), and the outputs match eager
// stock's. gelu's approximate="tanh" is keyword-only: Inductor passes it by name.
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

// One float32 contiguous kernel per op, chosen by -DOP_<name>.
const char* kKernels = R"(#include <math.h>
#include "forge_kernel.h"
static int64_t numel(const forge_tensor* t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; ++d) n *= t->sizes[d];
  return n;
}
int forge_kernel(const forge_call* c) {
  const forge_tensor* x = &c->inputs[0];
  const float* in = (const float*)x->data;
  float* out = (float*)c->outputs[0].data;
#if defined(OP_SOFTMAX)
  int64_t len = x->sizes[x->ndim - 1], rows = numel(x) / len;
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = in + r * len;
    float *o = out + r * len, m = -INFINITY, s = 0;
    for (int64_t i = 0; i < len; ++i) m = a[i] > m ? a[i] : m;
    for (int64_t i = 0; i < len; ++i) s += (o[i] = expf(a[i] - m));
    for (int64_t i = 0; i < len; ++i) o[i] /= s;
  }
#elif defined(OP_GELU_TANH)
  for (int64_t i = 0, n = numel(x); i < n; ++i) {
    float v = in[i];
    out[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
#else
  /* (out, mean, rstd) of native_layer_norm(input, normalized_shape, weight,
     bias, eps) or native_group_norm(input, weight, bias, N, C, HxW, group, eps). */
  const float* w = (const float*)c->inputs[1].data;
  const float* b = (const float*)c->inputs[2].data;
  float* mean = (float*)c->outputs[1].data;
  float* rstd = (float*)c->outputs[2].data;
#if defined(OP_LAYER_NORM)
  int64_t len = 1;
  for (int i = 0; i < c->scalars[0].len; ++i) len *= c->scalars[0].ints[i];
  int64_t rows = numel(x) / len, per = 1, chans = len;
  double eps = c->scalars[1].f;
#else
  int64_t chans = c->scalars[1].i, hxw = c->scalars[2].i, groups = c->scalars[3].i;
  int64_t rows = c->scalars[0].i * groups, len = chans / groups * hxw, per = hxw;
  double eps = c->scalars[4].f;
#endif
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = in + r * len;
    double s = 0, q = 0;
    for (int64_t i = 0; i < len; ++i) s += a[i];
    double m = s / len;
    for (int64_t i = 0; i < len; ++i) q += (a[i] - m) * (a[i] - m);
    double rs = 1.0 / sqrt(q / len + eps);
    mean[r] = (float)m;
    rstd[r] = (float)rs;
    for (int64_t i = 0; i < len; ++i) {
      int64_t ch = (r * len + i) / per % chans;  /* the element's weight */
      out[r * len + i] = (float)((a[i] - m) * rs) * (w ? w[ch] : 1.0f) + (b ? b[ch] : 0.0f);
    }
  }
#endif
  return 0;
}
)";

const char* kBlocks = R"(import json, os, sys, torch, torch.nn as nn, torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
pkg, repo = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(repo, "runtime", "autoload"))
sys.path.insert(0, os.path.join(repo, "runtime", "compile_bench"))
from forge_compile_bench import spellings
torch.set_num_threads(1)

class UNetBlock(nn.Module):
    def __init__(self, c=32, groups=8, heads=2):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(groups, c), nn.Conv2d(c, c, 3, padding=1)
        self.n2, self.c2 = nn.GroupNorm(groups, c), nn.Conv2d(c, c, 3, padding=1)
        self.na, self.heads = nn.GroupNorm(groups, c), heads
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
    def forward(self, x):
        h = self.c2(F.silu(self.n2(self.c1(F.silu(self.n1(x)))))) + x
        b, c, hh, ww = h.shape
        t = self.na(h).flatten(2).transpose(1, 2)
        q, k, v = self.qkv(t).reshape(b, hh * ww, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        a = (q @ k.transpose(-2, -1) * (c // self.heads) ** -0.5).softmax(dim=-1)
        return h + self.proj((a @ v).transpose(1, 2).reshape(b, hh * ww, c)).transpose(1, 2).reshape(b, c, hh, ww)

class ViTBlock(nn.Module):
    def __init__(self, d=32, heads=2):
        super().__init__()
        self.ln1, self.ln2, self.heads = nn.LayerNorm(d), nn.LayerNorm(d), heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = ((q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5).softmax(dim=-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

KERNELS = {"_softmax": "softmax", "gelu": "gelu_tanh", "native_layer_norm": "layer_norm",
           "native_group_norm": "group_norm"}

def record(a, name):  # an argument as the capture records it
    if isinstance(a, torch.Tensor):
        return {"type": "Tensor", "name": name, "dtype": str(a.dtype).rpartition(".")[2], "device": "cpu",
                "sizes": list(a.shape), "strides": list(a.stride()), "requires_grad": False}
    kinds = {type(None): "None", bool: "bool", int: "int", float: "float", str: "str", list: "int[]"}
    return {"type": kinds[type(a)], "name": name, "value": a}

entries = {}
class Capture(TorchDispatchMode):  # the eager calls of the four ops, by signature
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func._schema.name.split("::")[-1]
        if name in KERNELS:
            full = list(args) + [(kwargs or {}).get(a.name, a.default_value)
                                 for a in func._schema.arguments[len(args):]]
            recs = [record(a, s.name) for a, s in zip(full, func._schema.arguments)]
            key = name + json.dumps(recs)
            if key not in entries:
                calls[key] = (func, [a.clone() if isinstance(a, torch.Tensor) else a for a in full])
                outs = out if isinstance(out, tuple) else (out,)
                entries[key] = {"target": "%s/%s" % (model, name), "op": "aten::" + name, "overload": "",
                                "args": recs, "outputs": [record(o, "out") for o in outs], "vary": [],
                                "pins": [], "contiguous": True, "stock_threads": 1,
                                "kernel": "kernels/%s.so" % KERNELS[name], "under_compile": "forge"}
        return out
calls = {}

torch.manual_seed(0)
blocks = {"unet": (UNetBlock().eval(), torch.randn(2, 32, 8, 8)), "vit": (ViTBlock().eval(), torch.randn(2, 16, 32))}
stock = {}
with torch.no_grad():
    for model, (m, x) in blocks.items():
        with Capture():
            stock[model] = m(x)
for key, (func, args) in calls.items():  # as the build's compile baseline step does
    entries[key]["traced_as"], problem = spellings(func, args)
    print("spellings of %s: %s %s" % (func._schema.name.split("::")[-1], entries[key]["traced_as"], problem))
json.dump({"version": 1, "backend": "cpu", "entries": list(entries.values())},
          open(os.path.join(pkg, "package.json"), "w"), indent=1)

torch.ops.load_library(os.path.join(pkg, "libforge.so"))  # as forge run loads it
from forge_autoload import compile as fc
print("installed", fc.install(os.path.join(pkg, "package.json")))
from torch._inductor.utils import run_and_get_code
with torch.no_grad():
    for model, (m, x) in blocks.items():
        y, code = run_and_get_code(torch.compile(m), x)
        ops = sorted({l.split("torch.ops.forge.")[1].split("(")[0] for c in code for l in c.splitlines()
                      if "= torch.ops.forge." in l})
        print("%s forge ops %s max error %.3g" % (model, ops, (y - stock[model]).abs().max().item()))
)";

}  // namespace

TEST_SUITE_BEGIN("rules::CompileSpellingsTorch");

TEST_CASE("UNet-like and ViT-like blocks under torch.compile call their forged group_norm, softmax, layer_norm, gelu") {
  FORGE_SKIP_WITHOUT_TORCH();
  std::string why;
  const fs::path lib = test::package_library(&why);
  REQUIRE_MESSAGE(!lib.empty(), why);
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  test::TempDir dir;
  const fs::path pkg = dir / "package", report = dir / "report";
  fs::create_directories(pkg / "kernels");
  fs::create_directories(report);
  fs::copy_file(lib, pkg / "libforge.so");
  test::write_text(dir / "k.c", kKernels);
  for (const std::string op : {"softmax", "gelu_tanh", "layer_norm", "group_norm"}) {
    std::string upper = op;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    const std::string cc = "cc -shared -fPIC -O2 -DOP_" + upper + " -I'" + (repo / "runtime" / "abi").string() +
                           "' '" + (dir / "k.c").string() + "' -o '" + (pkg / "kernels" / (op + ".so")).string() +
                           "' -lm";
    REQUIRE(std::system(cc.c_str()) == 0);
  }
  test::write_text(dir / "blocks.py", kBlocks);
  const fs::path out = dir / "out.txt";
  const std::string cmd = "cd '" + dir.path().string() + "' && FORGE_PACKAGE_REPORT='" + report.string() +
                          "' TORCHINDUCTOR_CACHE_DIR='" + (dir / "inductor").string() + "' OMP_NUM_THREADS=1 '" +
                          (repo / ".venv/bin/python").string() + "' blocks.py '" + pkg.string() + "' '" +
                          repo.string() + "' > '" + out.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string text = test::read_text(out);
  INFO(text);
  REQUIRE(rc == 0);
  // Traced under torch.compile's front end, each op is spelled as eager code spells it.
  for (const char* op : {"native_group_norm", "_softmax", "native_layer_norm", "gelu"})
    CHECK(text.find(std::string("spellings of ") + op + ": [] None") != std::string::npos);
  CHECK(text.find("installed ['aten::_softmax.default', 'aten::gelu.default', 'aten::native_group_norm.default', "
                  "'aten::native_layer_norm.default']") != std::string::npos);
  CHECK(text.find("unet forge ops ['_softmax.default', 'native_group_norm.default'] max error") != std::string::npos);
  CHECK(text.find("vit forge ops ['_softmax.default', 'gelu.default', 'native_layer_norm.default'] max error") !=
        std::string::npos);
  for (const char* model : {"unet", "vit"}) {
    const auto at = text.find(std::string(model) + " forge ops");
    REQUIRE(at != std::string::npos);
    const auto e = text.find("max error ", at);
    CHECK(std::stod(text.substr(e + 10)) < 1e-4);
  }
  // libforge.so's counters: every compiled call took the forged kernel.
  std::map<std::string, long> forged;
  long reports = 0;
  for (const auto& f : fs::directory_iterator(report)) {
    ++reports;
    const json r = json::parse(test::read_text(f.path()));
    for (const auto& e : r["entries"]) forged[e["target"].get<std::string>()] += e["forged"].get<long>();
  }
  CHECK(reports == 1);
  const std::map<std::string, long> expected = {{"unet/native_group_norm", 3},
                                                {"unet/_softmax", 1},
                                                {"vit/native_layer_norm", 2},
                                                {"vit/_softmax", 1},
                                                {"vit/gelu", 1}};
  CHECK(forged == expected);
}

TEST_SUITE_END();
}  // namespace forge
