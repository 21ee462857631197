#include "engine/build.h"

#include "util/interrupt.h"

namespace forge {

std::optional<StepOutcome> BuildContext::step(const StepSpec& spec, const std::string& model) {
  // Interrupted: the rest of the build runs nothing and reports what the
  // store holds, as `forge status` does.
  if (interrupted() && !options.dry_run) {
    options.dry_run = true;
    stopped = true;
  }
  if (options.dry_run) {
    StepRecord rec{model, spec, builder.explain(spec)};
    rec.spec.run = nullptr;
    rec.spec.validate = nullptr;
    dry_steps.push_back(std::move(rec));
    auto cached = builder.lookup(spec);
    if (!cached) return std::nullopt;
    return StepOutcome{*cached, true};
  }
  StepOutcome outcome = builder.run(spec);
  if (interrupted()) stopped = true;
  if (!record_ok(outcome.record)) failed = true;
  return outcome;
}

nlohmann::json targets_json(const std::vector<Target>& targets) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& t : targets) list.push_back(target_json(t));
  return list;
}

nlohmann::json run_build(BuildContext& ctx, const std::vector<std::unique_ptr<Rule>>& rules) {
  for (const auto& rule : rules) rule->apply(ctx);
  ctx.builder.progress().finish();
  nlohmann::json models = nlohmann::json::object();
  for (const auto& [name, summary] : ctx.models) models[name] = summary;
  if (interrupted()) ctx.stopped = true;
  if (ctx.stopped)
    ctx.notes.push_back("interrupted: finished steps are kept; `forge build` continues from them");
  return {{"ok", !ctx.failed && !ctx.stopped},
          {"interrupted", ctx.stopped},
          {"steps_run", ctx.builder.steps_run()},
          {"steps_cached", ctx.builder.steps_cached()},
          {"device", {{"backend", ctx.device.backend}, {"name", ctx.device.name},
                      {"arch", ctx.device.arch}}},
          {"torch", ctx.toolchain.torch_version},
          {"models", models},
          {"notes", ctx.notes},
          {"history", ctx.history},
          {"package", ctx.package},
          {"llm", ctx.llm},
          {"search", ctx.search},
          {"targets", targets_json(ctx.targets)},
          {"not_selected", targets_json(ctx.not_selected)},
          {"chains", ctx.chains}};
}

}  // namespace forge
