// Compiling candidates for real with the host compiler (nvcc: test_compile_cuda.cpp): one ninja run
// per batch, per-candidate verbatim logs, content-addressed caching of
// successes and of compile errors, and a loadable library that speaks the ABI.
#include <dlfcn.h>
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "engine/build.h"
#include "rules/evaluate/compile.h"
#include "rules/evaluate/family.h"
#include "rules/evaluate/static_check.h"
#include "rules/search/strategies.h"
#include "runtime/abi/forge_kernel.h"
#include "tests/engine/fake_runner.h"
#include "tests/rules/evaluate/compile_world.h"
#include "tests/support.h"
#include "util/hash.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;
using test::World;

TEST_SUITE_BEGIN("rules::Compile");

namespace {

// out = in * k, elementwise over a contiguous float32 tensor.
std::string scale_kernel(int k) {
  return "#include \"forge_kernel.h\"\n"
         "extern \"C\" int forge_kernel(const forge_call* call) {\n"
         "  const forge_tensor& x = call->inputs[0];\n"
         "  long n = 1;\n"
         "  for (int d = 0; d < x.ndim; ++d) n *= x.sizes[d];\n"
         "  const float* in = static_cast<const float*>(x.data);\n"
         "  float* out = static_cast<float*>(call->outputs[0].data);\n"
         "  for (long i = 0; i < n; ++i) out[i] = in[i] * " +
         std::to_string(k) +
         ";\n"
         "  return 0;\n"
         "}\n";
}

const char* kBroken =
    "#include \"forge_kernel.h\"\n"
    "extern \"C\" int forge_kernel(const forge_call* call) {\n"
    "  return undeclared_thing(call);\n"
    "}\n";

// Loads the library and runs its forge_kernel on {1, 2, 3}.
std::vector<float> run_kernel(const fs::path& so) {
  void* lib = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(lib != nullptr, ::dlerror());
  auto fn = reinterpret_cast<int (*)(const forge_call*)>(::dlsym(lib, "forge_kernel"));
  REQUIRE(reinterpret_cast<void*>(fn) != nullptr);
  float in[3] = {1, 2, 3}, out[3] = {0, 0, 0};
  forge_tensor x{}, y{};
  x.data = in, x.ndim = 1, x.sizes[0] = 3, x.strides[0] = 1, x.dtype = FORGE_FLOAT32;
  y = x;
  y.data = out;
  forge_call call{};
  call.inputs = &x, call.n_inputs = 1, call.outputs = &y, call.n_outputs = 1;
  CHECK(fn(&call) == 0);
  ::dlclose(lib);
  return {out[0], out[1], out[2]};
}

}  // namespace

TEST_CASE("a batch compiles in one ninja run; the libraries load and compute") {
  World w;
  auto start = std::chrono::steady_clock::now();
  auto r = w.compile({{"twice.cpp", scale_kernel(2), CandidateLang::Cpp},
                      {"thrice.cpp", scale_kernel(3), CandidateLang::Cpp}});
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(r.size() == 2);
  CHECK(w.runner.ninja_runs == 1);
  for (const auto& c : r) {
    CHECK(c.ok);
    CHECK_FALSE(c.cached);
    CHECK(c.reason == "");
    CHECK(is_sha256_hex(c.so_digest));
    CHECK(c.so_path == materialize_dir(*w.ctx) / (c.so_digest + ".so"));
    CHECK(sha256_hex(test::read_text(c.so_path)) == c.so_digest);
    CHECK(c.seconds > 0);
    MESSAGE("g++ compile of a trivial candidate: " << c.seconds << " s");
  }
  MESSAGE("batch of 2, wall time including ninja: " << wall << " s");
  CHECK(r[0].seconds < 10);
  CHECK(run_kernel(r[0].so_path) == std::vector<float>{2, 4, 6});
  CHECK(run_kernel(r[1].so_path) == std::vector<float>{3, 6, 9});
  // The scratch folder is gone; the objects stay.
  for (const auto& e : fs::directory_iterator(w.manifest.store / "build"))
    CHECK(e.path().filename() == "objects");
}

// The search compiles the candidates it may take next while the worker
// evaluates (rules/search/search.cpp): the batch's ninja runs on a thread of its own
// and the caller compiles and runs other things meanwhile.
TEST_CASE("a background batch compiles while the caller goes on; finish() makes its results cache hits") {
  World w;
  const CandidateSource twice{"twice.cpp", scale_kernel(2), CandidateLang::Cpp};
  const CandidateSource thrice{"thrice.cpp", scale_kernel(3), CandidateLang::Cpp};
  const CandidateSource four{"four.cpp", scale_kernel(4), CandidateLang::Cpp};
  {
    BackgroundCompile ahead(*w.ctx, {twice, thrice, twice}, /*max_units=*/1);
    CHECK(ahead.size() == 1);  // capped; the duplicate would compile once anyway
    CHECK(ahead.compiling(twice));
    CHECK_FALSE(ahead.compiling(thrice));
    // Meanwhile the caller compiles something else in its own batch.
    auto now = w.compile({four});
    REQUIRE(now[0].ok);
    CHECK_FALSE(now[0].cached);
    CHECK(run_kernel(now[0].so_path) == std::vector<float>{4, 8, 12});
    ahead.finish();
    CHECK(ahead.ready());
    CHECK(ahead.size() == 0);
    CHECK_FALSE(ahead.compiling(twice));
    ahead.finish();  // once only
  }
  CHECK(w.runner.background_runs == 1);
  CHECK(w.runner.ninja_runs == 1);
  auto hit = w.compile({twice});
  CHECK(hit[0].cached);
  REQUIRE(hit[0].ok);
  CHECK(run_kernel(hit[0].so_path) == std::vector<float>{2, 4, 6});
  CHECK(w.runner.ninja_runs == 1);

  // Cached sources are left out: nothing to compile starts no ninja.
  {
    BackgroundCompile none(*w.ctx, {twice, four}, 8);
    CHECK(none.size() == 0);
    CHECK(none.ready());
  }
  CHECK(w.runner.background_runs == 1);

  // Destroyed before finish(): ninja is waited for, nothing is recorded, and
  // the scratch folder is removed; the compile runs again when asked for.
  { BackgroundCompile dropped(*w.ctx, {thrice}, 8); }
  CHECK(w.runner.background_runs == 2);
  for (const auto& e : fs::directory_iterator(w.manifest.store / "build"))
    CHECK(e.path().filename() == "objects");
  auto again = w.compile({thrice});
  CHECK_FALSE(again[0].cached);
  CHECK(again[0].ok);
}

TEST_CASE("an unchanged candidate never recompiles; a changed one does") {
  World w;
  auto first = w.compile({{"a.cpp", scale_kernel(2), CandidateLang::Cpp}});
  REQUIRE(first[0].ok);
  // Same source under another name, and the materialized copy deleted: cached.
  fs::remove(first[0].so_path);
  auto again = w.compile({{"renamed.cpp", scale_kernel(2), CandidateLang::Cpp}});
  CHECK(w.runner.ninja_runs == 1);
  CHECK(again[0].cached);
  CHECK(again[0].so_digest == first[0].so_digest);
  CHECK(fs::exists(again[0].so_path));
  // Two identical sources in one batch compile once.
  auto dup = w.compile({{"x.cpp", scale_kernel(5), CandidateLang::Cpp},
                        {"y.cpp", scale_kernel(5), CandidateLang::Cpp}});
  CHECK(w.runner.ninja_runs == 2);
  CHECK(dup[0].so_digest == dup[1].so_digest);
  CHECK_FALSE(dup[0].cached);
  CHECK(dup[1].cached);
  // A different compiler version is a different key.
  w.ctx->toolchain.cxx += " (patched)";
  auto other = w.compile({{"a.cpp", scale_kernel(2), CandidateLang::Cpp}});
  CHECK(w.runner.ninja_runs == 3);
  CHECK_FALSE(other[0].cached);
  CHECK(other[0].key != first[0].key);
}

TEST_CASE("compile errors come back verbatim per candidate, and are cached") {
  World w;
  auto r = w.compile({{"ok.cpp", scale_kernel(2), CandidateLang::Cpp},
                      {"broken.cpp", kBroken, CandidateLang::Cpp}});
  CHECK(r[0].ok);
  CHECK(r[0].log == "");
  CHECK_FALSE(r[1].ok);
  CHECK(r[1].reason == "compile_error");
  CHECK(r[1].detail.find("candidate.cpp:3:") != std::string::npos);
  CHECK(r[1].detail.find("undeclared_thing") != std::string::npos);
  // The whole log, exactly as g++ printed it (with the source line and caret).
  CHECK(r[1].log.find("candidate.cpp: In function") != std::string::npos);
  CHECK(r[1].log.find("return undeclared_thing(call);") != std::string::npos);
  CHECK(r[1].so_path.empty());
  auto again = w.compile({{"broken.cpp", kBroken, CandidateLang::Cpp}});
  CHECK(w.runner.ninja_runs == 1);
  CHECK(again[0].cached);
  CHECK(again[0].reason == "compile_error");
  CHECK(again[0].log == r[1].log);
}

TEST_CASE("a reference to a torch symbol does not link (-z defs)") {
  World w;
  auto r = w.compile({{"calls_torch.cpp",
                       "#include \"forge_kernel.h\"\n"
                       "namespace at { int _softmax_stub(const void*); }\n"
                       "extern \"C\" int forge_kernel(const forge_call* c) {\n"
                       "  return at::_softmax_stub(c);\n}\n",
                       CandidateLang::Cpp}});
  CHECK(r[0].reason == "compile_error");
  CHECK(r[0].log.find("undefined reference to `at::_softmax_stub") != std::string::npos);
}

TEST_CASE("a batch that cannot run is reported, and not cached") {
  World w;
  auto real = make_process_runner();
  test::FakeRunner no_ninja([&](const Command& c) {
    if (c.argv[0] == "ninja") return test::exited(127, "", "sh: ninja: not found\n");
    return real->run(c);
  });
  BuildContext ctx{w.manifest, *w.builder, no_ninja, w.ctx->toolchain, w.ctx->device, {}};
  auto r = compile_candidates(ctx, {{"a.cpp", scale_kernel(2), CandidateLang::Cpp}});
  CHECK(r[0].reason == "compile_failed");
  CHECK(r[0].detail == "ninja exit code 127: sh: ninja: not found\n");
  auto again = w.compile({{"a.cpp", scale_kernel(2), CandidateLang::Cpp}});
  CHECK(again[0].ok);
  CHECK_FALSE(again[0].cached);
}

TEST_CASE("dry mode compiles nothing") {
  World w;
  w.ctx->options.dry_run = true;
  auto r = w.compile({{"a.cpp", scale_kernel(2), CandidateLang::Cpp}});
  CHECK(r[0].reason == "not_compiled");
  CHECK(w.runner.ninja_runs == 0);
  w.ctx->options.dry_run = false;
  REQUIRE(w.compile({{"a.cpp", scale_kernel(2), CandidateLang::Cpp}})[0].ok);
  w.ctx->options.dry_run = true;
  auto cached = w.compile({{"a.cpp", scale_kernel(2), CandidateLang::Cpp}});
  CHECK(cached[0].ok);
  CHECK(cached[0].cached);
}

TEST_CASE("flags: Hopper gets sm_90a; the arch is part of the command") {
  CHECK(gencode_flag("sm_90a") == "-gencode=arch=compute_90a,code=sm_90a");
  CHECK(gencode_flag("sm_80") == "-gencode=arch=compute_80,code=sm_80");
  CHECK(gencode_flag("x86_64") == "");
  auto nv = compile_flags(CandidateLang::Cuda, "sm_90a");
  CHECK(nv[0] == "nvcc");
  CHECK(std::find(nv.begin(), nv.end(), "-gencode=arch=compute_90a,code=sm_90a") != nv.end());
  auto cxx = compile_flags(CandidateLang::Cpp, "");
  CHECK(cxx[0] == "c++");
  CHECK(std::find(cxx.begin(), cxx.end(), "-march=native") != cxx.end());
}

// The strategy library as shipped: every template's first instance (what the
// search tries first) passes the static check, and the CPU ones compile with the
// host compiler. The CUDA ones are compiled for sm_90a in test_compile_cuda.cpp
// (the gpu tier: it needs nvcc).
TEST_CASE("every shipped template's first instance passes the static check; the CPU ones compile") {
  World w;
  const auto cpu = test::first_instances(CandidateLang::Cpp);
  const auto cuda = test::first_instances(CandidateLang::Cuda);
  REQUIRE(cpu.size() >= 10);
  REQUIRE(cuda.size() >= 10);
  for (const auto* set : {&cpu, &cuda})
    for (const auto& src : *set) {
      const auto violations = static_check(src.text, src.lang);
      CHECK_MESSAGE(violations.empty(), src.name << ": " << (violations.empty() ? "" : violations.front().describe()));
    }
  const auto built = w.compile(cpu);
  for (size_t i = 0; i < built.size(); ++i) CHECK_MESSAGE(built[i].ok, cpu[i].name << ": " << built[i].log);
}

TEST_SUITE_END();
}  // namespace forge
