// Helpers for the compile tests (test_compile.cpp, and test_compile_cuda.cpp
// for the nvcc side): a build context over a fresh project folder with the real
// compilers, a runner that counts ninja runs, and the shipped templates' first
// instances.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "engine/build.h"
#include "rules/evaluate/compile.h"
#include "rules/evaluate/family.h"
#include "rules/search/strategies.h"
#include "runtime/abi/forge_kernel.h"
#include "tests/support.h"

namespace forge::test {

// Runs commands for real and counts the ninja runs: in the caller's thread,
// and those BackgroundCompile runs (under `nice`) on its own.
class CountingRunner : public CommandRunner {
 public:
  CommandResult run(const Command& c) override {
    if (!c.argv.empty() && c.argv[0] == "ninja") ++ninja_runs;
    if (c.argv.size() > 3 && c.argv[0] == "nice" && c.argv[3] == "ninja") ++background_runs;
    return m_real->run(c);
  }
  std::atomic<int> ninja_runs{0};
  std::atomic<int> background_runs{0};

 private:
  std::unique_ptr<CommandRunner> m_real = make_process_runner();
};

inline std::string version_line(CommandRunner& runner, const std::string& shell) {
  Command c;
  c.argv = shell_argv(shell);
  c.env["PATH"] = forge_path_env();
  CommandResult r = runner.run(c);
  return r.ok() ? r.out.substr(0, r.out.find('\n')) : "";
}

// A build context over a fresh project folder, with the real C++ compiler (and
// nvcc, where there is one: toolchain.nvcc is empty otherwise).
struct World {
  TempDir dir;
  Manifest manifest;
  std::unique_ptr<store::Store> store;
  Progress progress{false};
  std::unique_ptr<Builder> builder;
  CountingRunner runner;
  std::unique_ptr<BuildContext> ctx;

  World() {
    write_text(dir / "forge.yaml", "models:\n  m: {run: python m.py}\n");
    manifest = load_manifest(dir / "forge.yaml");
    store = store::open_local_store(manifest.store, [](const std::string&) {});
    builder = std::make_unique<Builder>(*store, progress);
    Toolchain tc;
    tc.cxx = version_line(runner, "c++ --version");
    tc.nvcc = version_line(runner, "nvcc --version 2>/dev/null | tail -n 2 | head -n 1");
    DeviceInfo dev{"cpu", "Test CPU", "x86_64", ""};
    ctx.reset(new BuildContext{manifest, *builder, runner, tc, dev, {}});
  }
  std::vector<CompileResult> compile(const std::vector<CandidateSource>& s,
                                     const CompileOptions& o = {}) {
    return compile_candidates(*ctx, s, o);
  }
};

// Every shipped template's first instance (what the search tries first) for
// one backend, for a typical signature ("$row"-style params need one).
inline std::vector<CandidateSource> first_instances(CandidateLang lang) {
  SignatureFacts facts;
  facts.row = 4096;
  facts.plane = 49;
  facts.slice = 1 << 20;
  facts.groups = 32;
  facts.dtypes =
      (1u << FORGE_BFLOAT16) | (1u << FORGE_FLOAT32);  // fewer instantiations: quicker nvcc
  std::vector<CandidateSource> out;
  for (const auto& f : load_families(default_targets_dir()))
    for (const auto& s : load_strategies(f)) {
      if ((s.backend == "cuda") != (lang == CandidateLang::Cuda)) continue;
      SignatureFacts g = facts;  // "$op": the family's first op (pointwise's relu, binary's add)
      g.op_name = f.ops.front().substr(0, f.ops.front().find('.'));
      out.push_back({f.name + "/" + s.name, instantiate(s, param_grid(s).front(), g), lang});
    }
  return out;
}

}  // namespace forge::test
