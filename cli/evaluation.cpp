#include "cli/evaluation.h"

#include "rules/capture/capture.h"
#include "rules/capture/runtime_build.h"
#include "rules/cluster/device_executor.h"
#include "util/error.h"

namespace forge::cli {
using nlohmann::json;

std::unique_ptr<EvalSession> open_eval_session(const Invocation& inv) {
  // What the last capture found, looked up without running anything.
  BuildOptions options;
  options.dry_run = true;
  auto s = std::make_unique<EvalSession>();
  s->session = open_session(inv, Access::Write, options);
  BuildContext& ctx = s->ctx();
  if (ctx.toolchain.torch_version.empty())
    throw Error("torch is not importable by " + ctx.toolchain.python +
                ": nothing can be evaluated");
  CaptureRule().apply(ctx);
  s->families = load_families(default_targets_dir());
  return s;
}

void start_evaluating(EvalSession& s) {
  if (s.executor) return;
  BuildContext& ctx = s.ctx();
  ctx.options.dry_run = false;
  ctx.dry_steps.clear();
  auto rt = ensure_runtime(ctx, /*with_worker=*/true);
  if (!rt) {
    std::string why;
    for (const auto& n : ctx.notes) why += "\n  " + n;
    throw Error("the evaluation worker is not available" + why);
  }
  s.executor = make_device_executor(ctx, *rt);
}

const Target& find_target(BuildContext& ctx, const std::string& name) {
  std::vector<std::string> missing;
  for (const auto& [model, summary] : ctx.models)
    if (summary.value("status", "") != "ok") missing.push_back(model);
  for (const auto& model : missing)
    if (name == model || name.rfind(model + "/", 0) == 0)
      throw Error("model '" + model +
                  "' is not captured: run `forge build` or `forge capture` first");
  // A chain's target: `forge status` lists its id (model/chain/...).
  if (name.find("/chain/") != std::string::npos) return resolve_target(ctx.chain_targets, name, {});
  if (ctx.targets.empty())
    throw Error("no captured targets: run `forge build` or `forge capture` first");
  return resolve_target(ctx.targets, name, ctx.not_selected);
}

bool target_on_cuda(const Target& t) {
  for (const auto& a : t.args)
    if (a.is_object() && a.value("device", "").rfind("cuda", 0) == 0) return true;
  return false;
}

std::optional<CandidateLang> lang_of(const std::filesystem::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".cu") return CandidateLang::Cuda;
  if (ext == ".cpp" || ext == ".cc" || ext == ".cxx") return CandidateLang::Cpp;
  return std::nullopt;
}

std::optional<Family> family_for(const EvalSession& s, const Target& t, std::string* why_not) {
  return family_of(s.families, t, why_not);
}

json evaluate_source(EvalSession& s, const Target& target, const CandidateSource& src,
                     const EvalSettings& settings, const Family* family) {
  std::optional<Family> own;
  if (!family) {
    std::string why;
    own = family_for(s, target, &why);
    if (!own) throw Error(target.id + ": " + why);
    family = &*own;
  }
  if (!s.executor) throw Error("internal: evaluate_source before start_evaluating");
  return evaluate_candidates(s.ctx(), *s.executor, target, *family, {src}, settings).front();
}

json record_cached(const json& rec) {
  if (rec.contains("evaluation")) return rec["evaluation"].value("cached", false);
  if (rec.contains("compile") && rec.value("reason", "") == "compile_error")
    return rec["compile"].value("cached", false);
  return nullptr;
}

}  // namespace forge::cli
