#include <cstdlib>

#include "engine/manifest.h"
#include "tests/support.h"
#include "util/error.h"

namespace fs = std::filesystem;
using forge::Manifest;
using forge::parse_manifest;

namespace {

// The full text of the ManifestError that parsing `text` throws.
std::string manifest_error(const std::string& text, const fs::path& path = "forge.yaml") {
  try {
    parse_manifest(text, path);
  } catch (const forge::ManifestError& e) {
    return e.what();
  }
  return "(no error)";
}

const char* kMinimal =
    "models:\n"
    "  resnet:\n"
    "    run: python infer.py\n";

}  // namespace

TEST_SUITE_BEGIN("engine::Manifest");

TEST_CASE("a manifest with only models is valid and everything else has its default") {
  Manifest m = parse_manifest(kMinimal, "/proj/forge.yaml");
  CHECK(m.path == "/proj/forge.yaml");
  CHECK(m.dir == "/proj");
  REQUIRE(m.models.size() == 1);
  CHECK(m.models[0].name == "resnet");
  CHECK(m.models[0].run == "python infer.py");
  CHECK(m.models[0].torchscript.empty());
  CHECK(m.models[0].inputs.empty());
  CHECK(m.models[0].workdir == "/proj");
  CHECK(m.models[0].env.empty());
  CHECK(m.targets.ops.empty());
  CHECK(m.targets.top == 8);
  CHECK(m.targets.min_share == 0.01);
  CHECK(m.budget.iterations == 20);
  CHECK(m.budget.seconds == 0);
  CHECK(m.budget.build_seconds == 0);
  CHECK(m.budget.parallel == 0);
  CHECK(m.device.backend == "auto");
  CHECK(m.device.arch == "auto");
  CHECK(m.capture.samples_per_target == 2);
  CHECK(m.capture.max_input_mb_per_model == 256);
  CHECK(m.capture.timeout_seconds == 1800);
  CHECK(m.proposer.strategies);
  CHECK_FALSE(m.proposer.llm.has_value());
  CHECK(m.history.ref == "refs/heads/forge/kernels");
  CHECK(m.history.repo.empty());
  CHECK(m.store == "/proj/.forge");
  CHECK(m.executor == "local");

  SUBCASE("a relative manifest path becomes absolute") {
    Manifest rel = parse_manifest(kMinimal, "sub/forge.yaml");
    CHECK(rel.path == fs::current_path() / "sub/forge.yaml");
    CHECK(rel.dir == fs::current_path() / "sub");
    CHECK(rel.store == fs::current_path() / "sub/.forge");
  }
  SUBCASE("empty sections keep their defaults") {
    Manifest e = parse_manifest(std::string(kMinimal) + "budget:\ntargets:\nproposer:\n  llm:\n",
                                "/proj/forge.yaml");
    CHECK(e.budget.iterations == 20);
    CHECK(e.targets.top == 8);
    CHECK_FALSE(e.proposer.llm.has_value());
  }
}

TEST_CASE("every field round-trips") {
  const char* text =
      "version: 1\n"
      "models:\n"
      "  resnet:\n"
      "    run: python infer.py --batch 8\n"
      "    workdir: bench\n"
      "    env: {CUDA_VISIBLE_DEVICES: '1', OMP_NUM_THREADS: 4}\n"
      "  encoder.v2:\n"
      "    torchscript: models/encoder.pt\n"
      "    inputs: /data/encoder_inputs.pt\n"
      "targets:\n"
      "  ops: [_softmax, mean.dim]\n"
      "  top: 3\n"
      "  min_share: 0.5\n"
      "budget:\n"
      "  iterations: 50\n"
      "  seconds: 90.5\n"
      "  parallel: 4\n"
      "  build_seconds: 1200\n"
      "device:\n"
      "  backend: cuda\n"
      "  arch: sm_90a\n"
      "capture:\n"
      "  samples_per_target: 5\n"
      "  max_input_mb_per_model: 64.5\n"
      "  timeout_seconds: 600\n"
      "proposer:\n"
      "  strategies: false\n"
      "  llm:\n"
      "    provider: openai\n"
      "    model: gpt-4o\n"
      "    base_url: http://localhost:8000/v1\n"
      "    api_key_env: MY_KEY\n"
      "history:\n"
      "  ref: refs/forge/kernels\n"
      "  repo: ../repo\n"
      "store: /var/cache/forge\n"
      "executor: slurm\n";
  Manifest m = parse_manifest(text, "/proj/app/forge.yaml");
  REQUIRE(m.models.size() == 2);
  CHECK(m.models[0].name == "resnet");
  CHECK(m.models[0].run == "python infer.py --batch 8");
  CHECK(m.models[0].workdir == "/proj/app/bench");
  CHECK(m.models[0].env == std::map<std::string, std::string>{{"CUDA_VISIBLE_DEVICES", "1"},
                                                              {"OMP_NUM_THREADS", "4"}});
  CHECK(m.models[1].name == "encoder.v2");
  CHECK(m.models[1].run.empty());
  CHECK(m.models[1].torchscript == "/proj/app/models/encoder.pt");
  CHECK(m.models[1].inputs == "/data/encoder_inputs.pt");
  CHECK(m.models[1].workdir == "/proj/app");
  CHECK(m.targets.ops == std::vector<std::string>{"_softmax", "mean.dim"});
  CHECK(m.targets.top == 3);
  CHECK(m.targets.min_share == 0.5);
  CHECK(m.budget.iterations == 50);
  CHECK(m.budget.seconds == 90.5);
  CHECK(m.budget.parallel == 4);
  CHECK(m.budget.build_seconds == 1200);
  CHECK(m.device.backend == "cuda");
  CHECK(m.device.arch == "sm_90a");
  CHECK(m.capture.samples_per_target == 5);
  CHECK(m.capture.max_input_mb_per_model == 64.5);
  CHECK(m.capture.timeout_seconds == 600);
  CHECK_FALSE(m.proposer.strategies);
  REQUIRE(m.proposer.llm.has_value());
  CHECK(m.proposer.llm->provider == "openai");
  CHECK(m.proposer.llm->model == "gpt-4o");
  CHECK(m.proposer.llm->base_url == "http://localhost:8000/v1");
  CHECK(m.proposer.llm->api_key_env == "MY_KEY");
  CHECK(m.proposer.llm->command.empty());
  CHECK(m.history.ref == "refs/forge/kernels");
  CHECK(m.history.repo == "/proj/repo");
  CHECK(m.store == "/var/cache/forge");
  CHECK(m.executor == "slurm");

  SUBCASE("targets.chains: unset (as many as top), a count, or a clear error") {
    CHECK_FALSE(parse_manifest(kMinimal, "/p/forge.yaml").targets.chains.has_value());
    CHECK(parse_manifest(std::string(kMinimal) + "targets: {chains: 0}\n", "/p/forge.yaml").targets.chains == 0);
    const std::string bad = manifest_error(std::string(kMinimal) + "targets: {chains: -1}\n");
    CHECK(bad.find("chains") != std::string::npos);
    CHECK(bad.find("forge.yaml:") != std::string::npos);
  }

  SUBCASE("llm providers") {
    auto llm = [](const std::string& body) {
      return parse_manifest(std::string(kMinimal) + "proposer:\n  llm:\n" + body, "/p/forge.yaml")
          .proposer.llm.value();
    };
    CHECK(llm("    provider: anthropic\n    model: claude\n").api_key_env == "ANTHROPIC_API_KEY");
    CHECK(llm("    provider: gemini\n    model: g\n").api_key_env == "GEMINI_API_KEY");
    CHECK(llm("    provider: openai\n    model: m\n").api_key_env == "OPENAI_API_KEY");
    forge::LlmSpec cmd = llm("    provider: command\n    command: ./propose.sh --fast\n");
    CHECK(cmd.command == "./propose.sh --fast");
    CHECK(cmd.api_key_env.empty());
    CHECK_FALSE(cmd.chains);  // chains are the library's unless asked
    CHECK(llm("    provider: command\n    command: x\n    chains: true\n").chains);
    const std::string bad =
        manifest_error(std::string(kMinimal) + "proposer:\n  llm:\n    provider: command\n    command: x\n    chains: often\n");
    CHECK(bad.find("chains") != std::string::npos);  // the field, with its file and line
    CHECK(bad.find("forge.yaml:") != std::string::npos);
  }
}

TEST_CASE("relative paths resolve against the manifest's folder") {
  const char* text =
      "models:\n"
      "  a:\n"
      "    torchscript: ../shared/a.pt\n"
      "    inputs: ./in/a_inputs.pt\n"
      "    workdir: .\n"
      "  b:\n"
      "    run: make run\n"
      "    workdir: tools/\n"
      "store: cache/../store\n"
      "history: {repo: ..}\n";
  Manifest m = parse_manifest(text, "/work/proj/forge.yaml");
  CHECK(m.models[0].torchscript == "/work/shared/a.pt");
  CHECK(m.models[0].inputs == "/work/proj/in/a_inputs.pt");
  CHECK(m.models[0].workdir == "/work/proj");
  CHECK(m.models[1].workdir == "/work/proj/tools");
  CHECK(m.store == "/work/proj/store");
  CHECK(m.history.repo == "/work");

  SUBCASE("~/ is the home folder") {
    const char* home = std::getenv("HOME");
    if (home && *home) {
      Manifest h =
          parse_manifest(std::string(kMinimal) + "store: ~/forge-store\n", "/p/forge.yaml");
      CHECK(h.store == (fs::path(home) / "forge-store").lexically_normal());
    }
  }
}

TEST_CASE("env maps") {
  const char* text =
      "models:\n"
      "  m:\n"
      "    run: ./go\n"
      "    env:\n"
      "      PATH_EXTRA: /opt/bin\n"
      "      _DEBUG: \"\"\n"
      "      RATE: 0.5\n"
      "      FLAG: true\n";
  Manifest m = parse_manifest(text, "/p/forge.yaml");
  CHECK(m.models[0].env ==
        std::map<std::string, std::string>{
            {"PATH_EXTRA", "/opt/bin"}, {"_DEBUG", ""}, {"RATE", "0.5"}, {"FLAG", "true"}});

  CHECK(manifest_error("models:\n  m:\n    run: ./go\n    env: {1BAD: x}\n") ==
        "forge.yaml:4:11: '1BAD' is not a valid environment variable name\n"
        "    env: {1BAD: x}\n"
        "          ^");
  CHECK(manifest_error("models:\n  m:\n    run: ./go\n    env:\n      A: [1]\n") ==
        "forge.yaml:5:10: 'A' must be a string, got a list\n"
        "      A: [1]\n"
        "         ^");
  CHECK(manifest_error("models:\n  m:\n    run: ./go\n    env: {FORGE_COMPILE_POLICY: inductor}\n") ==
        "forge.yaml:4:11: 'FORGE_COMPILE_POLICY': FORGE_* variables are set by forge itself and cannot be set in "
        "'env'\n"
        "    env: {FORGE_COMPILE_POLICY: inductor}\n"
        "          ^");
  CHECK(manifest_error("models:\n  m: {run: x, compile_env: {C: '1', FORGE_LOAD_LIBS: a.so}}\n")
            .rfind("forge.yaml:2:37: 'FORGE_LOAD_LIBS': FORGE_* variables are set by forge itself and cannot be set "
                   "in 'compile_env'", 0) == 0);
  CHECK(parse_manifest("models:\n  m: {run: x, env: {FORGED: '1', MY_FORGE_X: '2'}}\n", "forge.yaml").models[0].env.size() ==
        2);
  CHECK(manifest_error("models:\n  m:\n    run: ./go\n    env: [A=1]\n") ==
        "forge.yaml:4:10: 'env' must be a map\n"
        "    env: [A=1]\n"
        "         ^");
}

TEST_CASE("the missing and the empty manifest") {
  SUBCASE("empty file") {
    CHECK(manifest_error("") ==
          "forge.yaml:1:1: 'models' is required\n"
          "\n"
          "^");
  }
  SUBCASE("only comments") {
    CHECK(manifest_error("# nothing yet\n") ==
          "forge.yaml:1:1: 'models' is required\n"
          "# nothing yet\n"
          "^");
  }
  SUBCASE("other keys but no models: the top-level map is blamed") {
    CHECK(manifest_error("# settings\nbudget: {iterations: 3}\n") ==
          "forge.yaml:2:1: 'models' is required\n"
          "budget: {iterations: 3}\n"
          "^");
  }
  SUBCASE("not a map") {
    CHECK(manifest_error("- resnet\n") ==
          "forge.yaml:1:1: the top level must be a map, e.g. models: {NAME: {run: COMMAND}}\n"
          "- resnet\n"
          "^");
  }
  SUBCASE("the display path is the one given") {
    CHECK(manifest_error("", "conf/my.yaml") ==
          "conf/my.yaml:1:1: 'models' is required\n"
          "\n"
          "^");
  }
}

TEST_CASE("models errors") {
  SUBCASE("models is not a map") {
    CHECK(manifest_error("models: [resnet]\n") ==
          "forge.yaml:1:9: 'models' must be a map of NAME: {run: COMMAND}\n"
          "models: [resnet]\n"
          "        ^");
  }
  SUBCASE("models is empty") {
    CHECK(manifest_error("models:\nbudget: {}\n") ==
          "forge.yaml:1:1: 'models' must be a map of NAME: {run: COMMAND}\n"
          "models:\n"
          "^");
    CHECK(manifest_error("models: {}\n") ==
          "forge.yaml:1:9: 'models' must be a map of NAME: {run: COMMAND}\n"
          "models: {}\n"
          "        ^");
  }
  SUBCASE("neither run nor torchscript") {
    CHECK(manifest_error("models:\n  resnet:\n    workdir: .\n") ==
          "forge.yaml:2:3: model 'resnet' needs exactly one of 'run' or 'torchscript'\n"
          "  resnet:\n"
          "  ^");
    CHECK(manifest_error("models:\n  resnet:\n") ==
          "forge.yaml:2:3: model 'resnet' needs exactly one of 'run' or 'torchscript'\n"
          "  resnet:\n"
          "  ^");
  }
  SUBCASE("both run and torchscript") {
    CHECK(manifest_error("models:\n  resnet: {run: x, torchscript: m.pt, inputs: i.pt}\n") ==
          "forge.yaml:2:3: model 'resnet' needs exactly one of 'run' or 'torchscript'\n"
          "  resnet: {run: x, torchscript: m.pt, inputs: i.pt}\n"
          "  ^");
  }
  SUBCASE("torchscript without inputs") {
    CHECK(manifest_error("models:\n  enc:\n    torchscript: enc.pt\n") ==
          "forge.yaml:2:3: model 'enc' needs 'inputs' with 'torchscript'\n"
          "  enc:\n"
          "  ^");
  }
  SUBCASE("latency must be a regular expression with a group") {
    CHECK(manifest_error("models:\n  m: {run: x, latency: 'ms'}\n") ==
          "forge.yaml:2:24: 'latency' must be a regular expression with a group capturing a number, "
          "e.g. '([0-9.]+) ms'\n"
          "  m: {run: x, latency: 'ms'}\n"
          "                       ^");
    CHECK(manifest_error("models:\n  m: {run: x, latency: '(['}\n")
              .rfind("forge.yaml:2:24: 'latency' must be a regular expression", 0) == 0);
    CHECK(parse_manifest("models:\n  m: {run: x, latency: '([0-9.]+) ms/iter'}\n", "forge.yaml")
              .models[0]
              .latency == "([0-9.]+) ms/iter");
  }
  SUBCASE("check_runs: a count of at least 1, default 5") {
    CHECK(manifest_error("models:\n  m: {run: x, check_runs: 0}\n")
              .rfind("forge.yaml:2:27: 'check_runs' must be at least 1, got '0'", 0) == 0);
    CHECK(manifest_error("models:\n  m: {run: x, check_runs: two}\n")
              .rfind("forge.yaml:2:27: 'check_runs' must be a non-negative integer", 0) == 0);
    CHECK(parse_manifest("models:\n  m: {run: x, check_runs: 2}\n", "forge.yaml").models[0].check_runs == 2);
    CHECK(parse_manifest("models:\n  m: {run: x}\n", "forge.yaml").models[0].check_runs == 5);
  }
  SUBCASE("compile_env: the environment of the compiled run; unset by default, {} allowed") {
    const auto with = parse_manifest("models:\n  m: {run: x, compile_env: {COMPILE: '1'}}\n", "forge.yaml");
    REQUIRE(with.models[0].compile_env.has_value());
    CHECK(with.models[0].compile_env->at("COMPILE") == "1");
    const auto empty = parse_manifest("models:\n  m: {run: x, compile_env: {}}\n", "forge.yaml");
    REQUIRE(empty.models[0].compile_env.has_value());
    CHECK(empty.models[0].compile_env->empty());
    CHECK_FALSE(parse_manifest("models:\n  m: {run: x}\n", "forge.yaml").models[0].compile_env.has_value());
    CHECK(manifest_error("models:\n  m: {run: x, compile_env: 1}\n").rfind("forge.yaml:2:28: 'compile_env' must be a map", 0) == 0);
    CHECK(manifest_error("models:\n  m: {torchscript: m.pt, inputs: i.pt, compile_env: {}}\n")
              .rfind("forge.yaml:2:40: 'compile_env' needs 'run'", 0) == 0);
  }
  SUBCASE("inputs with run") {
    CHECK(manifest_error("models:\n  enc:\n    run: x\n    inputs: i.pt\n") ==
          "forge.yaml:4:5: 'inputs' is only allowed with 'torchscript'\n"
          "    inputs: i.pt\n"
          "    ^");
  }
  SUBCASE("a model that is a command, not a map") {
    CHECK(manifest_error("models:\n  resnet: python infer.py\n") ==
          "forge.yaml:2:11: model 'resnet' must be a map, e.g. {run: COMMAND}\n"
          "  resnet: python infer.py\n"
          "          ^");
  }
  SUBCASE("bad model names") {
    CHECK(manifest_error("models:\n  my model: {run: x}\n") ==
          "forge.yaml:2:3: model name 'my model' may only use letters, digits, '_', '.' and '-'\n"
          "  my model: {run: x}\n"
          "  ^");
    CHECK(manifest_error("models:\n  ..: {run: x}\n") ==
          "forge.yaml:2:3: model name '..' is reserved\n"
          "  ..: {run: x}\n"
          "  ^");
  }
  SUBCASE("run must be a non-empty string") {
    CHECK(manifest_error("models:\n  m:\n    run:\n") ==
          "forge.yaml:3:5: 'run' must be a string, got nothing\n"
          "    run:\n"
          "    ^");
    CHECK(manifest_error("models:\n  m:\n    run: ''\n") ==
          "forge.yaml:3:10: 'run' must not be empty\n"
          "    run: ''\n"
          "         ^");
    CHECK(manifest_error("models:\n  m:\n    run: [python, x.py]\n") ==
          "forge.yaml:3:10: 'run' must be a string, got a list\n"
          "    run: [python, x.py]\n"
          "         ^");
  }
}

TEST_CASE("unknown keys, with did you mean") {
  SUBCASE("top level") {
    CHECK(manifest_error(std::string(kMinimal) + "budgt:\n  iterations: 3\n") ==
          "forge.yaml:4:1: unknown key 'budgt' (did you mean 'budget'?)\n"
          "budgt:\n"
          "^");
  }
  SUBCASE("no close match") {
    CHECK(manifest_error(std::string(kMinimal) + "frobnicate: 1\n") ==
          "forge.yaml:4:1: unknown key 'frobnicate'\n"
          "frobnicate: 1\n"
          "^");
  }
  SUBCASE("inside a model") {
    CHECK(manifest_error("models:\n  resnet:\n    rnu: python infer.py\n") ==
          "forge.yaml:3:5: unknown key 'rnu' (did you mean 'run'?)\n"
          "    rnu: python infer.py\n"
          "    ^");
  }
  SUBCASE("inside budget") {
    CHECK(manifest_error(std::string(kMinimal) + "budget:\n  iteratoins: 3\n") ==
          "forge.yaml:5:3: unknown key 'iteratoins' (did you mean 'iterations'?)\n"
          "  iteratoins: 3\n"
          "  ^");
  }
  SUBCASE("a known key in the wrong place says where it belongs") {
    CHECK(manifest_error(std::string(kMinimal) + "iterations: 3\n") ==
          "forge.yaml:4:1: unknown key 'iterations' (it belongs under 'budget')\n"
          "iterations: 3\n"
          "^");
    CHECK(manifest_error("models:\n  m:\n    run: x\n    store: s\n") ==
          "forge.yaml:4:5: unknown key 'store' (it belongs at the top level)\n"
          "    store: s\n"
          "    ^");
    CHECK(manifest_error(std::string(kMinimal) + "proposer:\n  provider: openai\n") ==
          "forge.yaml:5:3: unknown key 'provider' (it belongs under 'proposer.llm')\n"
          "  provider: openai\n"
          "  ^");
  }
  SUBCASE("short keys are not over-corrected") {
    CHECK(manifest_error("models:\n  m:\n    run: x\n    e: 1\n") ==
          "forge.yaml:4:5: unknown key 'e'\n"
          "    e: 1\n"
          "    ^");
  }
  SUBCASE("keys must be plain names") {
    CHECK(manifest_error(std::string(kMinimal) + "? [a, b]\n: 1\n") ==
          "forge.yaml:4:3: a key must be a plain name, got a list\n"
          "? [a, b]\n"
          "  ^");
  }
}

TEST_CASE("duplicate keys") {
  CHECK(manifest_error("models:\n  m:\n    run: a\n    run: b\n") ==
        "forge.yaml:4:5: duplicate key 'run'\n"
        "    run: b\n"
        "    ^");
  CHECK(manifest_error("models:\n  m: {run: a}\n  m: {run: b}\n") ==
        "forge.yaml:3:3: duplicate key 'm'\n"
        "  m: {run: b}\n"
        "  ^");
  CHECK(manifest_error(std::string(kMinimal) + "store: a\nstore: b\n") ==
        "forge.yaml:5:1: duplicate key 'store'\n"
        "store: b\n"
        "^");
}

TEST_CASE("bad values") {
  auto error_in = [](const std::string& rest) {
    return manifest_error(std::string(kMinimal) + rest);
  };
  SUBCASE("integers") {
    CHECK(error_in("budget:\n  iterations: many\n") ==
          "forge.yaml:5:15: 'iterations' must be a non-negative integer, got 'many'\n"
          "  iterations: many\n"
          "              ^");
    CHECK(error_in("budget: {parallel: -1}\n") ==
          "forge.yaml:4:20: 'parallel' must be a non-negative integer, got '-1'\n"
          "budget: {parallel: -1}\n"
          "                   ^");
    CHECK(error_in("targets: {top: 2.5}\n") ==
          "forge.yaml:4:16: 'top' must be a non-negative integer, got '2.5'\n"
          "targets: {top: 2.5}\n"
          "               ^");
    CHECK(error_in("capture:\n  samples_per_target:\n") ==
          "forge.yaml:5:3: 'samples_per_target' must be a non-negative integer, got nothing\n"
          "  samples_per_target:\n"
          "  ^");
  }
  SUBCASE("numbers") {
    CHECK(error_in("budget: {build_seconds: -1}\n") ==
          "forge.yaml:4:25: 'build_seconds' must be a non-negative number, got '-1'\n"
          "budget: {build_seconds: -1}\n"
          "                        ^");
    CHECK(error_in("budget: {seconds: -3}\n") ==
          "forge.yaml:4:19: 'seconds' must be a non-negative number, got '-3'\n"
          "budget: {seconds: -3}\n"
          "                  ^");
    CHECK(error_in("targets: {min_share: 2}\n") ==
          "forge.yaml:4:22: 'min_share' must be a number between 0 and 1, got '2'\n"
          "targets: {min_share: 2}\n"
          "                     ^");
    CHECK(error_in("capture: {max_input_mb_per_model: 0}\n") ==
          "forge.yaml:4:35: 'max_input_mb_per_model' must be a positive number, got '0'\n"
          "capture: {max_input_mb_per_model: 0}\n"
          "                                  ^");
    CHECK(error_in("capture: {timeout_seconds: .inf}\n") ==
          "forge.yaml:4:28: 'timeout_seconds' must be a positive number, got '.inf'\n"
          "capture: {timeout_seconds: .inf}\n"
          "                           ^");
  }
  SUBCASE("choices") {
    CHECK(error_in("device:\n  backend: rocm\n") ==
          "forge.yaml:5:12: 'backend' must be one of auto, cuda, cpu, got 'rocm'\n"
          "  backend: rocm\n"
          "           ^");
    CHECK(error_in("device:\n  backend: cdua\n") ==
          "forge.yaml:5:12: 'backend' must be one of auto, cuda, cpu, got 'cdua' (did you mean "
          "'cuda'?)\n"
          "  backend: cdua\n"
          "           ^");
    CHECK(error_in("executor: k8s\n") ==
          "forge.yaml:4:11: 'executor' must be one of local, slurm, got 'k8s'\n"
          "executor: k8s\n"
          "          ^");
    CHECK(error_in("device: {arch: hopper}\n") ==
          "forge.yaml:4:16: 'arch' must be auto or sm_NN (e.g. sm_90a), got 'hopper'\n"
          "device: {arch: hopper}\n"
          "               ^");
    CHECK(error_in("proposer: {strategies: maybe}\n") ==
          "forge.yaml:4:24: 'strategies' must be true or false, got 'maybe'\n"
          "proposer: {strategies: maybe}\n"
          "                       ^");
  }
  SUBCASE("version") {
    CHECK(manifest_error("version: 2\n" + std::string(kMinimal)) ==
          "forge.yaml:1:10: 'version' must be 1, got '2'\n"
          "version: 2\n"
          "         ^");
  }
  SUBCASE("wrong node types") {
    CHECK(error_in("targets: [ops]\n") ==
          "forge.yaml:4:10: 'targets' must be a map\n"
          "targets: [ops]\n"
          "         ^");
    CHECK(error_in("budget: 10\n") ==
          "forge.yaml:4:9: 'budget' must be a map\n"
          "budget: 10\n"
          "        ^");
    CHECK(error_in("targets: {ops: _softmax}\n") ==
          "forge.yaml:4:16: 'ops' must be a list of op names\n"
          "targets: {ops: _softmax}\n"
          "               ^");
    CHECK(error_in("targets: {ops: [a, {b: c}]}\n") ==
          "forge.yaml:4:20: 'ops' entries must be op names, got a map\n"
          "targets: {ops: [a, {b: c}]}\n"
          "                   ^");
    CHECK(error_in("store: ''\n") ==
          "forge.yaml:4:8: 'store' must not be empty\n"
          "store: ''\n"
          "       ^");
  }
  SUBCASE("history") {
    CHECK(error_in("history: {ref: main}\n") ==
          "forge.yaml:4:16: 'ref' must be a git ref name starting with 'refs/', got 'main'\n"
          "history: {ref: main}\n"
          "               ^");
    CHECK(error_in("history: {ref: refs/heads/a..b}\n") ==
          "forge.yaml:4:16: 'ref' must be a git ref name starting with 'refs/', got "
          "'refs/heads/a..b'\n"
          "history: {ref: refs/heads/a..b}\n"
          "               ^");
  }
  SUBCASE("llm") {
    CHECK(error_in("proposer:\n  llm:\n    model: gpt\n") ==
          "forge.yaml:5:3: 'llm' needs 'provider' (one of openai, anthropic, gemini, command)\n"
          "  llm:\n"
          "  ^");
    CHECK(error_in("proposer:\n  llm: {provider: openai}\n") ==
          "forge.yaml:5:3: provider 'openai' needs 'model'\n"
          "  llm: {provider: openai}\n"
          "  ^");
    CHECK(error_in("proposer:\n  llm: {provider: command}\n") ==
          "forge.yaml:5:3: provider 'command' needs 'command'\n"
          "  llm: {provider: command}\n"
          "  ^");
    CHECK(error_in("proposer:\n  llm: {provider: gemini, model: g, command: x}\n") ==
          "forge.yaml:5:37: 'command' is only allowed with provider: command\n"
          "  llm: {provider: gemini, model: g, command: x}\n"
          "                                    ^");
    CHECK(error_in("proposer:\n  llm: {provider: openai, model: m, api_key_env: sk-abc123}\n") ==
          "forge.yaml:5:50: 'api_key_env' must be the name of an environment variable (e.g. "
          "OPENAI_API_KEY), not the key itself\n"
          "  llm: {provider: openai, model: m, api_key_env: sk-abc123}\n"
          "                                                 ^");
  }
}

TEST_CASE("YAML syntax errors are reported in the same format") {
  SUBCASE("unclosed flow sequence") {
    CHECK(manifest_error("models:\n  m: {run: x}\ntargets: {ops: [a, b}\n") ==
          "forge.yaml:3:21: invalid YAML: illegal flow end\n"
          "targets: {ops: [a, b}\n"
          "                    ^");
  }
  SUBCASE("bad indentation") {
    CHECK(manifest_error("models:\n  m:\n    run: x\n   workdir: .\n") ==
          "forge.yaml:4:4: invalid YAML: end of map not found\n"
          "   workdir: .\n"
          "   ^");
  }
  SUBCASE("tab indentation names the tab") {
    CHECK(manifest_error("models:\n  m:\n\trun: x\n") ==
          "forge.yaml:3:1: invalid YAML: tab in indentation (YAML indents with spaces)\n"
          "\trun: x\n"
          "^");
    CHECK(manifest_error("models:\n  m:\n  \t run: x\n") ==
          "forge.yaml:3:3: invalid YAML: tab in indentation (YAML indents with spaces)\n"
          "  \t run: x\n"
          "  ^");
  }
  SUBCASE("tabs inside a line keep the caret aligned") {
    CHECK(manifest_error("models:\n  m: {run: x}\nbudget: {seconds:\tlots}\n") ==
          "forge.yaml:3:19: 'seconds' must be a non-negative number, got 'lots'\n"
          "budget: {seconds:\tlots}\n"
          "                 \t^");
  }
  SUBCASE("undefined alias") {
    CHECK(manifest_error("models: *m\n") ==
          "forge.yaml:1:9: invalid YAML: the referenced anchor is not defined\n"
          "models: *m\n"
          "        ^");
  }
  SUBCASE("a second document") {
    CHECK(manifest_error(std::string(kMinimal) + "---\nbudget: {}\n") ==
          "forge.yaml:5:1: only one YAML document is allowed here\n"
          "budget: {}\n"
          "^");
    CHECK(parse_manifest(std::string(kMinimal) + "---\n", "/p/forge.yaml").models.size() == 1);
  }
}

TEST_CASE("columns count characters, not bytes") {
  CHECK(manifest_error("models:\n  m: {run: \"héllo\", wrkdir: .}\n") ==
        "forge.yaml:2:21: unknown key 'wrkdir' (did you mean 'workdir'?)\n"
        "  m: {run: \"héllo\", wrkdir: .}\n"
        "                    ^");
}

TEST_CASE("CRLF files") {
  forge::test::TempDir tmp;
  fs::path file = tmp / "forge.yaml";
  forge::test::write_text(file,
                          "\xEF\xBB\xBFmodels:\r\n  m:\r\n    run: ./go\r\n    workdir: w\r\n");
  Manifest m = forge::load_manifest(file);
  REQUIRE(m.models.size() == 1);
  CHECK(m.models[0].run == "./go");
  CHECK(m.models[0].workdir == tmp.path() / "w");

  SUBCASE("errors echo the line without its CR") {
    forge::test::write_text(file, "models:\r\n  m:\r\n    run: ./go\r\nbudget: {top: 1}\r\n");
    try {
      forge::load_manifest(file);
      FAIL("no error");
    } catch (const forge::ManifestError& e) {
      CHECK(std::string(e.what()) == file.string() +
                                         ":4:10: unknown key 'top' (it belongs under 'targets')\n" +
                                         "budget: {top: 1}\n" + "         ^");
    }
  }
  SUBCASE("old Mac line breaks") {
    CHECK(parse_manifest("models:\r  m:\r    run: ./go\r", "/p/forge.yaml").models[0].run ==
          "./go");
  }
}

TEST_CASE("load_manifest reads files") {
  forge::test::TempDir tmp;
  SUBCASE("a file") {
    forge::test::write_text(tmp / "forge.yaml", kMinimal);
    Manifest m = forge::load_manifest(tmp / "forge.yaml");
    CHECK(m.path == tmp / "forge.yaml");
    CHECK(m.dir == tmp.path());
    CHECK(m.store == tmp / ".forge");
  }
  SUBCASE("a missing file") {
    fs::path missing = tmp / "nope.yaml";
    CHECK_THROWS_WITH_AS(
        forge::load_manifest(missing),
        ("cannot read " + missing.string() + ": No such file or directory").c_str(), forge::Error);
  }
  SUBCASE("a folder") {
    CHECK_THROWS_WITH_AS(forge::load_manifest(tmp.path()),
                         ("cannot read " + tmp.path().string() + ": Is a directory").c_str(),
                         forge::Error);
  }
}

TEST_CASE("forge.yaml.example parses and shows the defaults") {
  fs::path example = fs::path(FORGE_TEST_DIR) / ".." / "forge.yaml.example";
  Manifest m = forge::load_manifest(example);
  Manifest defaults = parse_manifest(kMinimal, example);
  REQUIRE(m.models.size() == 2);
  CHECK(m.models[0].name == "resnet");
  CHECK_FALSE(m.models[0].run.empty());
  CHECK(m.models[0].workdir == defaults.dir);
  REQUIRE(m.models[0].compile_env.has_value());
  CHECK(m.models[0].compile_env->at("COMPILE") == "1");
  CHECK(m.models[1].name == "encoder");
  CHECK_FALSE(m.models[1].torchscript.empty());
  CHECK_FALSE(m.models[1].inputs.empty());
  // Every value the example spells out is the default.
  CHECK(m.targets.ops == defaults.targets.ops);
  CHECK(m.targets.top == defaults.targets.top);
  CHECK(m.targets.min_share == defaults.targets.min_share);
  CHECK(m.budget.iterations == defaults.budget.iterations);
  CHECK(m.budget.seconds == defaults.budget.seconds);
  CHECK(m.budget.parallel == defaults.budget.parallel);
  CHECK(m.device.backend == defaults.device.backend);
  CHECK(m.device.arch == defaults.device.arch);
  CHECK(m.capture.samples_per_target == defaults.capture.samples_per_target);
  CHECK(m.capture.max_input_mb_per_model == defaults.capture.max_input_mb_per_model);
  CHECK(m.capture.timeout_seconds == defaults.capture.timeout_seconds);
  CHECK(m.proposer.strategies == defaults.proposer.strategies);
  CHECK(m.proposer.llm.has_value() == defaults.proposer.llm.has_value());
  CHECK(m.history.ref == defaults.history.ref);
  CHECK(m.history.repo == defaults.history.repo);
  CHECK(m.store == defaults.store);
  CHECK(m.executor == defaults.executor);

  SUBCASE("its commented-out llm block is valid too") {
    // Uncomment the lines "  # llm:" .. and check that the block parses.
    std::string text = forge::test::read_text(example);
    std::string uncommented;
    size_t start = 0;
    bool in_llm = false;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(start, end - start);
      if (line.starts_with("  # llm:")) in_llm = true;
      if (in_llm && !line.starts_with("  #")) in_llm = false;
      if (in_llm) line.erase(2, 2);
      uncommented += line + "\n";
      start = end + 1;
    }
    Manifest with_llm = parse_manifest(uncommented, example);
    REQUIRE(with_llm.proposer.llm.has_value());
    CHECK(with_llm.proposer.llm->provider == "openai");
  }
}

TEST_SUITE_END();
