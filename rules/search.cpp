#include "rules/search.h"

#include "engine/journal.h"
#include "engine/mcts.h"
#include "rules/evaluate.h"
#include "rules/strategies.h"
#include "util/hash.h"

namespace forge {
using nlohmann::json;

namespace {

mcts::Outcome::Status status_of(const json& rec) {
  using S = mcts::Outcome::Status;
  const std::string verdict = rec.value("verdict", "");
  const std::string reason = rec.value("reason", "");
  if (verdict == "accepted") return rec.value("bench", json::object()).value("faster", false) ? S::Ok : S::Slower;
  if (reason == "static_check") return S::StaticReject;
  if (reason == "compile_error") return S::CompileError;
  if (reason == "timeout") return S::Timeout;
  if (reason.rfind("crashed", 0) == 0 || reason == "cuda_error") return S::Crash;
  return S::WrongResult;
}

// Action -> instantiated source -> evaluation record -> outcome. The record is
// kept as a store object named in the outcome's steps, so reports can read the
// best node's benchmark after a replay without evaluating anything.
class StrategyEvaluator : public mcts::Evaluator {
 public:
  StrategyEvaluator(BuildContext& ctx, Executor& executor, const Target& target,
                    const Family& family, const std::vector<Strategy>& strategies)
      : m_ctx(ctx), m_executor(executor), m_target(target), m_family(family),
        m_strategies(strategies) {}

  mcts::Outcome evaluate(const mcts::EvalRequest& req) override {
    const Strategy* s = nullptr;
    for (const auto& x : m_strategies)
      if (x.name == req.action.strategy) s = &x;
    if (!s) throw std::runtime_error("unknown strategy " + req.action.strategy);
    std::string name = s->name;
    for (const auto& [k, v] : req.action.params.items()) name += "-" + k + v.dump();
    name += s->source.extension().string();
    CandidateSource src{name, instantiate(*s, req.action.params),
                        s->source.extension() == ".cu" ? CandidateLang::Cuda : CandidateLang::Cpp};
    json rec = evaluate_candidates(m_ctx, m_executor, m_target, m_family, {src}).front();
    if (rec.value("verdict", "") == "error")
      throw std::runtime_error("could not evaluate " + name + ": " + rec.value("detail", ""));
    mcts::Outcome out;
    out.status = status_of(rec);
    out.reason = rec.value("reason", "") + (rec.contains("detail") ? ": " + rec.value("detail", "") : "");
    if (out.verified()) {
      double sp = rec.value("bench", json::object()).value("speedup_eager", 0.0);
      out.speedup = sp > 0 ? sp : 1e-6;
    }
    out.steps = {{"file", src.name},
                 {"source", m_ctx.builder.store().put_object(src.text)},
                 {"evaluation", m_ctx.builder.store().put_object(rec.dump())}};
    return out;
  }

 private:
  BuildContext& m_ctx;
  Executor& m_executor;
  const Target& m_target;
  const Family& m_family;
  const std::vector<Strategy>& m_strategies;
};

// What every outcome of this target depends on; a change starts the journal over.
std::string search_context(const BuildContext& ctx, const Target& t, const Family& family,
                           const std::vector<Strategy>& strategies, const std::string& worker) {
  Hasher h;
  h.add("op", t.op).add("signature", t.signature).add("args", t.args.dump())
      .add("samples", t.sample_inputs.dump()).add("family", family.digest)
      .add("device", ctx.device.fingerprint()).add("toolchain", ctx.toolchain.fingerprint())
      .add("worker", worker).add("bench", bench_settings(ctx, EvalSettings{}).dump());
  for (const auto& s : strategies)
    h.add("strategy", s.name).add("text", s.text).add("params", s.params.dump());
  return h.hex();
}

void report_best(BuildContext& ctx, Target& t, const mcts::Tree& tree) {
  t.iterations = tree.completed();
  t.verified = t.accepted = 0;
  t.outcomes.clear();
  t.kernels.clear();
  const mcts::Node* best = nullptr;
  for (const auto& n : tree.nodes()) {
    if (n.id == mcts::kRoot || n.pending) continue;
    ++t.outcomes[mcts::status_name(n.outcome.status)];
    if (n.outcome.verified()) ++t.verified;
    if (n.outcome.status != mcts::Outcome::Status::Ok) continue;
    ++t.accepted;
    t.kernels.push_back({n.iteration, n.id, n.parent, n.action.strategy, n.action.params,
                         n.outcome.steps.value("file", ""), n.outcome.steps.value("source", ""),
                         n.outcome.steps.value("evaluation", ""), n.outcome.speedup});
    if (!best || n.outcome.speedup > best->outcome.speedup) best = &n;
  }
  if (!best) return;
  t.best_speedup_eager = best->outcome.speedup;
  auto text = ctx.builder.store().get_object(best->outcome.steps.value("evaluation", ""));
  json rec = text ? json::parse(*text, nullptr, false) : json();
  if (rec.is_object()) {
    const json& bench = rec.value("bench", json::object());
    if (bench.contains("floor_pct") && bench["floor_pct"].is_number())
      t.floor_pct = bench["floor_pct"].get<double>();
    t.best_strategy = best->action.strategy + " " + best->action.params.dump();
  }
}

}  // namespace

void SearchRule::apply(BuildContext& ctx) {
  if (ctx.targets.empty()) return;
  Budget budget = ctx.manifest.budget;
  if (ctx.options.budget) budget.iterations = *ctx.options.budget;
  budget.parallel = 1;
  const auto families = load_families(default_targets_dir());
  std::optional<RuntimeLibs> rt;
  std::unique_ptr<Executor> executor;
  int searched = 0;
  for (auto& t : ctx.targets) {
    try {
      searched += search_target(ctx, t, families, budget, rt, executor);
    } catch (const std::exception& e) {
      // One broken family or strategy file costs its target, not the build.
      ctx.failed = true;
      ctx.notes.push_back("search of " + t.id + " failed: " + e.what());
    }
  }
  if (searched == 0)
    ctx.notes.push_back("search: no target has a strategy family for this backend yet");
}

int SearchRule::search_target(BuildContext& ctx, Target& t, const std::vector<Family>& families,
                              const Budget& budget, std::optional<RuntimeLibs>& rt,
                              std::unique_ptr<Executor>& executor) {
  {
    auto family = find_family(families, t.op);
    if (!family) return 0;
    std::vector<Strategy> strategies;
    for (auto& s : load_strategies(*family))
      if (strategy_applies(s, t, ctx.device.backend)) strategies.push_back(std::move(s));
    if (strategies.empty()) return 0;
    if (!rt) {
      rt = ensure_runtime(ctx, /*with_worker=*/true);
      if (!rt) {
        throw std::runtime_error("the evaluation worker is not built");
      }
    }
    const std::string context = search_context(ctx, t, *family, strategies, rt->worker_digest);
    mcts::SearchParams params;
    params.seed = std::stoull(sha256_hex(t.id).substr(0, 12), nullptr, 16);
    mcts::Tree tree;
    StrategyProposer proposer(strategies);
    mcts::Search search(tree, proposer, params);
    Progress& progress = ctx.builder.progress();
    mcts::Journal journal(ctx.builder.store(), mcts::journal_ref(t.id), context, params.to_json(),
                          [&progress](const std::string& m) { progress.warn(m); });
    if (ctx.options.dry_run) {
      // Status: the journal as it stands, nothing evaluated.
      Budget none = budget;
      none.iterations = static_cast<int>(journal.records().size());
      none.seconds = 0;
      struct NoEval : mcts::Evaluator {
        mcts::Outcome evaluate(const mcts::EvalRequest&) override {
          throw std::runtime_error("dry run");
        }
      } no_eval;
      try {
        mcts::run_search(search, no_eval, none, journal);
      } catch (const std::exception&) {
      }
    } else {
      if (!executor) executor = make_device_executor(ctx, *rt);
      StrategyEvaluator evaluator(ctx, *executor, t, *family, strategies);
      try {
        mcts::run_search(search, evaluator, budget, journal);
      } catch (const std::exception& e) {
        ctx.failed = true;
        ctx.notes.push_back("search of " + t.id + " stopped: " + e.what());
      }
    }
    report_best(ctx, t, tree);
    return 1;
  }
}

}  // namespace forge
