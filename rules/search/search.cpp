#include "rules/search/search.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "engine/journal.h"
#include "engine/mcts.h"
#include "engine/store_json.h"
#include "rules/capture/ceiling.h"
#include "rules/cluster/device_executor.h"
#include "rules/evaluate/evaluate.h"
#include "rules/evaluate/judge.h"
#include "rules/evaluate/race.h"
#include "rules/improvement.h"
#include "rules/llm/proposer.h"
#include "rules/search/chain_strategies.h"
#include "rules/search/not_searched.h"
#include "rules/search/strategies.h"
#include "util/hash.h"
#include "util/interrupt.h"

namespace forge {
using nlohmann::json;

namespace {

// Action -> candidate source -> evaluation record -> outcome. The record is
// kept as a store object named in the outcome's steps, so reports can read the
// best node's benchmark after a replay without evaluating anything. "strategy"
// actions instantiate a template; "llm" actions go to the LlmEvaluator.
class SearchEvaluator : public mcts::Evaluator {
 public:
  SearchEvaluator(BuildContext& ctx, Executor& executor, const Target& target,
                  const Family& family, const std::vector<Strategy>& strategies,
                  LlmEvaluator* llm)
      : m_ctx(ctx), m_executor(executor), m_target(target), m_family(family),
        m_strategies(strategies), m_llm(llm) {}

  // Compile ahead: while the worker evaluates one candidate, up to `count`
  // candidates the search may take next compile in the background
  // (BackgroundCompile): alternately the candidate's own refinements (its
  // children, should it win) and the actions the proposer lists under the same
  // parent (expanded while it stays open). Their results land in the
  // content-addressed compile cache, so when the search takes one its compile
  // is a cache hit, or a wait on the batch already compiling it; a guess the
  // search never takes costs an idle core, not time. Outcomes and the tree do
  // not change.
  void compile_ahead(const mcts::Tree& tree, StrategyProposer& proposer, int count) {
    m_tree = &tree;
    m_ahead_from = &proposer;
    m_ahead = count;
  }
  // Seconds the search waited for candidates' compiles (their own, or the
  // batch compiling them): the part of its wall clock that better lookahead
  // (or more cores) could win back.
  double compile_wait_seconds() const { return m_compile_wait; }
  // Evaluations whose candidate was already compiled, or compiling, when the
  // search took it.
  int compiled_ahead() const { return m_ahead_hits; }
  // Waits for the batches still compiling and records their results, so a
  // raised budget finds them cached.
  void finish_ahead() {
    for (auto& b : m_batches) b->finish();
    m_batches.clear();
  }

  // Interrupted (util/interrupt.h): no new evaluation starts, and one the
  // interruption cut short is not journaled (the search drops it, the next
  // build runs it again).
  mcts::Outcome evaluate(const mcts::EvalRequest& req) override {
    if (interrupted()) throw Interrupted();
    mcts::Outcome out = evaluate_now(req);
    if (interrupted()) throw Interrupted();
    if (out.status == mcts::Outcome::Status::Ok) race_tip(out);
    if (interrupted()) throw Interrupted();
    return out;
  }

  // The tree whose completed kernels form the improvement chain.
  void watch(const mcts::Tree& tree) { m_tree = &tree; }

 private:
  // The improvement rule (rules/improvement.h): a kernel faster than stock
  // whose median beats the tip's races the tip; the race's record goes into
  // the outcome's steps (journaled), where the chain reads it.
  void race_tip(mcts::Outcome& out) {
    if (!m_tree) return;
    store::Store& store = m_ctx.builder.store();
    std::vector<ChainEntry> entries;
    std::vector<json> records;
    for (const auto& n : m_tree->nodes()) {
      if (n.id == mcts::kRoot || n.pending || n.outcome.status != mcts::Outcome::Status::Ok) continue;
      ChainEntry e;
      json rec;
      if (!load_chain_entry(store, n.outcome.steps.value("evaluation", ""), n.outcome.steps.value("race", ""), &e,
                            &rec))
        continue;
      entries.push_back(std::move(e));
      records.push_back(std::move(rec));
    }
    const auto chain = improvement_chain(entries);
    if (chain.empty()) return;
    const Contender tip{entries[chain.back()].evaluation, records[chain.back()]};
    Contender challenger{out.steps.value("evaluation", ""), json()};
    challenger.record = get_json_object(store, challenger.evaluation);
    if (!challenger.record.is_object() ||
        candidate_time(challenger.record).median >= entries[chain.back()].time.median)
      return;
    if (auto race = race_kernels(m_ctx, m_executor, m_target, m_family, tip, challenger, RaceRule{}))
      out.steps["race"] = store.put_object(race->dump());
  }

  mcts::Outcome evaluate_now(const mcts::EvalRequest& req) {
    if (req.action.kind == "llm") {
      if (!m_llm) throw std::runtime_error("an llm action without a model configured");
      return m_llm->evaluate(req);
    }
    CandidateSource src = source_for(req.action);
    if (m_ahead > 0 && m_tree && m_ahead_from) {
      const auto t0 = std::chrono::steady_clock::now();
      bool ahead = false;
      for (auto& b : m_batches) {
        const bool has_src = b->compiling(src);
        ahead = ahead || has_src;
        if (has_src || b->ready()) b->finish();
      }
      m_batches.erase(std::remove_if(m_batches.begin(), m_batches.end(),
                                     [](const auto& b) { return b->size() == 0; }),
                      m_batches.end());
      // A cache hit when it was compiled ahead; otherwise it compiles now, alone.
      const CompileResult own = compile_candidates(m_ctx, {src}).front();
      if (ahead || own.cached) ++m_ahead_hits;
      m_compile_wait += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      start_ahead(req, src);
    }
    mcts::Outcome out = judge_candidate(m_ctx, m_executor, m_target, m_family, src);
    out.steps["proposer"] = "strategy";
    out.steps["what"] = describe_action(req.action, req.parent);
    return out;
  }

  // Starts a batch of the candidates the search may take after `req`, up to
  // m_ahead compiling at once; those cached or compiling are left out.
  void start_ahead(const mcts::EvalRequest& req, const CandidateSource& src) {
    size_t busy = 0;
    for (const auto& b : m_batches) busy += b->size();
    if (busy >= static_cast<size_t>(m_ahead)) return;
    mcts::Rng rng(0);  // StrategyProposer::actions does not draw from it
    std::vector<mcts::Action> siblings, children;
    for (const auto& a : m_ahead_from->actions(*m_tree, req.parent, rng))
      if (a.kind == "strategy" && mcts::action_key(a) != mcts::action_key(req.action))
        siblings.push_back(a);
    if (req.action.kind == "strategy") {
      std::set<std::string> seen;
      for (const auto& n : m_tree->nodes()) seen.insert(n.key);
      for (const auto& s : m_strategies)
        if (s.name == req.action.strategy)
          for (const auto& p : param_neighbours(s, req.action.params, signature_facts(m_target))) {
            mcts::Action a{"strategy", s.name, p, ""};
            if (!seen.count(mcts::action_key(a))) children.push_back(a);
          }
    }
    std::vector<CandidateSource> next;
    std::set<std::string> names{src.name};
    auto busy_with = [this](const CandidateSource& c) {
      for (const auto& b : m_batches)
        if (b->compiling(c)) return true;
      return false;
    };
    for (size_t i = 0; i < children.size() || i < siblings.size(); ++i)
      for (const auto* list : {&children, &siblings})
        if (i < list->size()) {
          CandidateSource c = source_for((*list)[i]);
          if (names.insert(c.name).second && !busy_with(c)) next.push_back(std::move(c));
        }
    if (next.empty()) return;
    CompileOptions options;
    options.jobs = m_ahead;
    auto batch = std::make_unique<BackgroundCompile>(m_ctx, std::move(next), m_ahead - busy, options);
    if (batch->size() > 0) m_batches.push_back(std::move(batch));
  }

  CandidateSource source_for(const mcts::Action& action) const {
    const Strategy* s = nullptr;
    for (const auto& x : m_strategies)
      if (x.name == action.strategy) s = &x;
    if (!s) throw std::runtime_error("unknown strategy " + action.strategy);
    std::string name = s->name;
    for (const auto& [k, v] : action.params.items()) name += "-" + k + v.dump();
    name += s->source.extension().string();
    return {name, instantiate(*s, action.params, signature_facts(m_target)),
            s->source.extension() == ".cu" ? CandidateLang::Cuda : CandidateLang::Cpp};
  }

  BuildContext& m_ctx;
  Executor& m_executor;
  const Target& m_target;
  const Family& m_family;
  const std::vector<Strategy>& m_strategies;
  LlmEvaluator* m_llm;
  const mcts::Tree* m_tree = nullptr;
  StrategyProposer* m_ahead_from = nullptr;
  int m_ahead = 0;
  double m_compile_wait = 0;
  int m_ahead_hits = 0;
  std::vector<std::unique_ptr<BackgroundCompile>> m_batches;  // compiling ahead
};

// What every outcome of this target depends on; a change starts the journal over.
// The strategies hashed are the applicable ones whether or not they are
// proposed (the model's first prompt shows one); the model enters by what shapes
// its answers (provider, model, base_url or command, variants, max_tokens,
// temperature, the prompt templates), never by key, prices or timeouts.
std::string search_context(const BuildContext& ctx, const Target& t, const Family& family,
                           const std::vector<Strategy>& strategies, const std::string& worker,
                           const json& proposer) {
  Hasher h;
  h.add("op", t.op).add("signature", t.signature).add("args", t.args.dump())
      .add("samples", t.sample_inputs.dump()).add("family", family.digest)
      .add("device", ctx.device.fingerprint()).add("toolchain", ctx.toolchain.fingerprint())
      .add("worker", worker).add("bench", bench_settings(ctx, EvalSettings{}).dump())
      .add("proposer", proposer.dump())
      // 2: "$row" params substituted; 3: FORGE_DTYPES (rules/search/strategies.h);
      // 4: FORGE_DTYPES names every tensor's dtype (mixed signatures compiled
      // an instance that refused their calls: their recorded outcomes go).
      .add("instantiate", "4");
  for (const auto& s : strategies) {
    h.add("strategy", s.name).add("text", s.text).add("params", s.params.dump());
    for (const auto& [fact, factors] : s.capacity) {  // it orders the proposals
      h.add("capacity", fact);
      for (const auto& f : factors) h.add("factor", f);
    }
  }
  return h.hex();
}

void report_best(BuildContext& ctx, Target& t, const mcts::Tree& tree) {
  t.iterations = tree.completed();
  t.tree_depth = 0;
  t.best_iteration.reset();
  t.best_hot_speedup_eager.reset();
  t.verified = t.accepted = 0;
  t.outcomes.clear();
  t.rejections.clear();
  t.kernels.clear();
  t.shipped.reset();
  t.stage_seconds = nullptr;
  // What each stage cost, summed over the tree's evaluations as first run
  // (cached replays keep the original times): docs/PERF.md's per-stage figures.
  double compile_s = 0, verify_s = 0, bench_s = 0, eval_s = 0;
  int timed = 0;
  for (const auto& n : tree.nodes()) {
    if (n.id == mcts::kRoot || n.pending) continue;
    t.tree_depth = std::max(t.tree_depth, n.depth);
    ++t.outcomes[mcts::status_name(n.outcome.status)];
    if (!n.outcome.verified()) {
      std::string why = n.outcome.reason.substr(0, n.outcome.reason.find('\n'));
      ++t.rejections[why.empty() ? mcts::status_name(n.outcome.status) : why.substr(0, 160)];
    }
    if (json r = get_json_object(ctx.builder.store(), n.outcome.steps.value("evaluation", ""));
        r.is_object()) {
      auto num = [](const json& o, const char* k) {
        return o.is_object() && o.contains(k) && o[k].is_number() ? o[k].get<double>() : 0.0;
      };
      compile_s += num(r.value("compile", json()), "seconds");
      verify_s += num(r.value("verify", json()), "seconds");
      bench_s += num(r.value("bench", json()), "seconds");
      eval_s += num(r.value("evaluation", json()), "seconds");
      ++timed;
    }
    if (n.outcome.verified()) ++t.verified;
    if (n.outcome.status != mcts::Outcome::Status::Ok) continue;
    ++t.accepted;
    t.kernels.push_back({n.iteration, n.id, n.parent, n.action.strategy, n.action.params,
                         n.action.kind == "llm" ? "llm" : "strategy", n.outcome.steps.value("file", ""), n.outcome.steps.value("source", ""),
                         n.outcome.steps.value("evaluation", ""), n.outcome.speedup,
                         n.outcome.steps.value("race", "")});
  }
  t.stage_seconds = {{"evaluations", timed}, {"compile", compile_s}, {"verify", verify_s},
                     {"bench", bench_s}, {"worker", eval_s}};
  // The target's figures are its shipped kernel's (rules/improvement.h): a later
  // kernel faster only within the spreads is not an improvement, in the report
  // as in the package and the history. No record, no best kernel (nothing ships).
  std::vector<json> records;
  t.shipped = shipped_kernel_index(ctx.builder.store(), t, &records);
  if (!t.shipped) return;
  const mcts::Node& best = tree.node(t.kernels[*t.shipped].node);
  const json& bench = records[*t.shipped].value("bench", json::object());
  t.best_iteration = best.iteration + 1;
  t.best_speedup_eager = best.outcome.speedup;
  if (bench.contains("floor_pct") && bench["floor_pct"].is_number()) t.floor_pct = bench["floor_pct"].get<double>();
  const json hot = bench.value("hot", json::object()).value("speedup_eager", json());
  if (hot.is_number()) t.best_hot_speedup_eager = hot.get<double>();
  t.best_proposer = best.action.kind == "llm" ? "llm" : "strategy";
  t.best_strategy = kernel_label(t.best_proposer, best.action.strategy, best.action.params);
}

}  // namespace

void SearchRule::apply(BuildContext& ctx) {
  if (ctx.targets.empty() && ctx.chain_targets.empty()) return;
  Budget budget = ctx.manifest.budget;
  if (ctx.options.budget) budget.iterations = *ctx.options.budget;
  budget.parallel = 1;
  const auto families = load_families(default_targets_dir());
  std::optional<RuntimeLibs> rt;
  std::unique_ptr<Executor> executor;
  m_ledger = {};
  int searched = 0;
  auto search_one = [&](Target& t, ChainStrategies* generated) {
    try {
      searched += search_target(ctx, t, families, budget, rt, executor, generated);
    } catch (const std::exception& e) {
      // One broken family or strategy file costs its target, not the build.
      ctx.failed = true;
      ctx.notes.push_back("search of " + t.id + " failed: " + e.what());
    }
  };
  // Chains whose ops the library can fuse (chain_strategies.h), as many as
  // forge.yaml's `targets.chains`, or `targets.top` where that is unset
  // (longest time first). The package ships those that are a module's whole
  // forward or beat Inductor's fusion (rules/package/assembly.cpp).
  const TargetSelection& sel = ctx.manifest.targets;
  const std::string cap = sel.chains ? "targets.chains (" + std::to_string(*sel.chains) + ")"
                                     : "targets.top (" + std::to_string(sel.top) + ")";
  int chains_left = sel.chains ? *sel.chains : sel.top > 0 ? sel.top : INT32_MAX;
  auto search_chain = [&](Target& t) {
    std::string why;
    json* c = nullptr;
    for (auto& entry : ctx.chains)
      if (entry.value("id", json()) == t.id) c = &entry;
    ChainStrategies generated = ctx.manifest.proposer.strategies ? chain_strategies(t) : ChainStrategies{};
    why = generated.why;
    const bool by_model = ctx.manifest.proposer.llm && ctx.manifest.proposer.llm->chains;
    if (generated.strategies.empty() && !by_model) {
      if (c && !why.empty())
        (*c)["why"] = "not searched: the library has no fused kernel for it (" + why + "); `forge try` verifies one (its id)";
      return;
    }
    if (chains_left-- <= 0) {
      if (c) (*c)["why"] = "not searched: beyond forge.yaml's " + cap;
      return;
    }
    search_one(t, &generated);
    if (!c) return;
    (*c)["searched"] = t.iterations > 0;
    if (t.iterations > 0)
      (*c)["why"] = std::string("searched with ") +
                    (generated.strategies.empty() ? "the model's kernels"
                     : by_model                   ? "the library's fused kernel and the model's"
                                                  : "the library's fused kernel") +
                    "; the package stage says whether it ships" + (t.why.empty() ? "" : "; " + t.why);
    else if (!t.why.empty())
      (*c)["why"] = "not searched: " + t.why;
    (*c)["search"] = {{"iterations", t.iterations},
                       {"verified", t.verified},
                       {"accepted", t.accepted},
                       {"outcomes", t.outcomes},
                       {"best_strategy", t.best_strategy.empty() ? json(nullptr) : json(t.best_strategy)},
                       {"best_speedup_eager", t.best_speedup_eager ? json(*t.best_speedup_eager) : json(nullptr)},
                       {"packaged", false}};
  };
  // Single ops and chains together, longest time first: a chain holds its
  // ops' time, so a build cut short (Ctrl-C, a CI limit) has searched what
  // saves most, not each op of a chain before the chain.
  std::vector<std::pair<Target*, bool>> order;  // (target, is a chain)
  for (auto& t : ctx.targets) order.push_back({&t, false});
  for (auto& t : ctx.chain_targets) order.push_back({&t, true});
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first->time_us > b.first->time_us; });
  // budget.build_seconds: no evaluation starts after it (search_target); the
  // package stage runs on what was accepted, in this build or before.
  m_stop_at = 0;
  m_unreached = 0;
  if (budget.build_seconds > 0) {
    // mcts::steady_seconds() reads the same clock as ctx.started.
    m_stop_at = std::chrono::duration<double>(ctx.started.time_since_epoch()).count() + budget.build_seconds;
    std::ostringstream seconds;
    seconds << budget.build_seconds;
    m_limit = "budget.build_seconds (" + seconds.str() + " s)";
  }
  for (auto& [t, chain] : order) chain ? search_chain(*t) : search_one(*t, nullptr);
  if (m_unreached > 0)
    ctx.notes.push_back("search: " + m_limit + " ran out; " + std::to_string(m_unreached) +
                        " target(s) searched no further than their journals (the next build goes on)");
  if (ctx.manifest.proposer.llm) ctx.llm = m_ledger.to_json(*ctx.manifest.proposer.llm);
  if (searched == 0)
    ctx.notes.push_back("search: no target has a strategy family for this backend yet");
}

llm::Client& SearchRule::model_client(BuildContext& ctx) {
  if (!m_client) {
    const LlmSpec& spec = *ctx.manifest.proposer.llm;
    llm::ClientSettings settings;
    settings.total_timeout = spec.timeout_seconds;
    settings.concurrency = spec.concurrency;
    settings.cwd = ctx.manifest.dir;
    m_client = llm::make_client(spec, settings, m_transport, ctx.runner);
  }
  return *m_client;
}

int SearchRule::search_target(BuildContext& ctx, Target& t, const std::vector<Family>& families,
                              const Budget& budget, std::optional<RuntimeLibs>& rt,
                              std::unique_ptr<Executor>& executor, ChainStrategies* generated) {
  std::string no_family_why;
  auto family = family_of(families, t, &no_family_why);
  if (!family) return no_family(t, no_family_why);
  ProposerSpec want = ctx.manifest.proposer;
  // A chain's kernels come from the library's generator, and from the model
  // where forge.yaml asks it for chains (proposer.llm.chains): each chain's
  // search then sends requests of its own.
  if (t.chain.is_object() && want.llm && !want.llm->chains) want.llm.reset();
  std::vector<Strategy> strategies;
  if (t.chain.is_object()) {
    // A chain: the library's kernels, generated from its definition (once, by the caller).
    ChainStrategies own;
    if (!generated) own = chain_strategies(t), generated = &own;
    for (auto& s : generated->strategies)
      if (s.backend == ctx.device.backend) strategies.push_back(std::move(s));
    if (strategies.empty() && want.strategies && !want.llm)
      return leave_out(t, Selection::NoProposer,
                       "no fused kernel: " + (generated->why.empty() ? "the library has no fused template for the " +
                                                                           ctx.device.backend + " backend"
                                                                     : generated->why)),
             0;
  } else {
    for (auto& s : load_strategies(*family))
      if (strategy_applies(s, t, ctx.device.backend)) strategies.push_back(std::move(s));
  }
  if (!want.llm && (!want.strategies || strategies.empty())) return no_proposer(t, *family, want, ctx.device.backend);
  if (!rt) {
    rt = ensure_runtime(ctx, /*with_worker=*/true);
    if (!rt) throw std::runtime_error("the evaluation worker is not built");
  }
  std::optional<llm::PromptTemplates> templates;
  json proposer_config = {{"strategies", want.strategies}, {"llm", nullptr}};
  if (want.llm) {
    templates = llm::load_prompt_templates(llm::default_prompts_dir());
    const LlmSpec& l = *want.llm;
    proposer_config["llm"] = {{"identity", model_client(ctx).identity()},
                              {"variants", l.variants},
                              {"max_tokens", l.max_tokens},
                              {"temperature", l.temperature ? json(*l.temperature) : json(nullptr)},
                              {"prompts", templates->digest()}};
  }
  const std::string context =
      search_context(ctx, t, *family, strategies, rt->worker_digest, proposer_config);
  mcts::SearchParams params;
  params.seed = std::stoull(sha256_hex(t.id).substr(0, 12), nullptr, 16);
  mcts::Tree tree;
  StrategyProposer by_strategy(want.strategies ? strategies : std::vector<Strategy>{}, signature_facts(t));
  LlmProposer by_model(want.llm ? want.llm->variants : 0);
  MixedProposer proposer({&by_strategy, &by_model});
  mcts::Search search(tree, proposer, params);
  Progress& progress = ctx.builder.progress();
  mcts::Journal journal(ctx.builder.store(), mcts::journal_ref(t.id), context, params.to_json(),
                        [&progress](const std::string& m) { progress.warn(m); });
  // Past budget.build_seconds: as a dry run, the journal replayed and nothing
  // evaluated, so the kernels earlier builds accepted are still reported and packaged.
  const bool late = !ctx.options.dry_run && past_stop();
  if (late) {
    ++m_unreached;
    t.why = m_limit + " ran out before its search (the next build goes on)";
  }
  if (ctx.options.dry_run || late) {
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
    std::unique_ptr<llm::CachedClient> cached;
    std::unique_ptr<LlmEvaluator> by_llm;
    if (want.llm) {
      cached = std::make_unique<llm::CachedClient>(model_client(ctx), ctx.builder.store());
      LlmEvaluator::Inputs in{&t, &*family, &*want.llm, &*templates, "", copy_ceiling(ctx)};
      if (!strategies.empty())
        if (auto p = first_fitting(strategies.front(), signature_facts(t)))
          in.example_source = instantiate(strategies.front(), *p);
      by_llm = std::make_unique<LlmEvaluator>(ctx, *executor, *cached, std::move(in));
      by_llm->ask_ahead_within(budget.iterations);
    }
    SearchEvaluator evaluator(ctx, *executor, t, *family, strategies, by_llm.get());
    evaluator.watch(tree);
    // budget.parallel = candidates compiled at once (evaluations stay one at a
    // time: timings on a shared device would not be honest). 0: one per core
    // for CUDA (nvcc takes seconds per candidate), 1 for the CPU backend (the
    // host compiler takes a tenth of a second; ahead would only add work).
    int width = ctx.manifest.budget.parallel;
    if (width <= 0)
      width = ctx.device.backend == "cuda"
                  ? static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))
                  : 1;
    if (width > 1 && want.strategies) evaluator.compile_ahead(tree, by_strategy, width - 1);
    const auto started = std::chrono::steady_clock::now();
    const size_t journaled = journal.records().size();
    int fresh = 0;  // evaluations run now (journal replays excluded)
    bool exhausted = false;  // stopped before the budget: no untried action left
    try {
      mcts::RunOptions run;
      run.stop_at = m_stop_at;
      const auto result = mcts::run_search(search, evaluator, budget, journal, run);
      fresh = result.evaluated;
      exhausted = result.exhausted;
      if (result.time_up && past_stop())
        ctx.notes.push_back("search of " + t.id + " stopped at budget.build_seconds after " +
                            std::to_string(result.evaluated) + " new evaluations (the next build goes on)");
      evaluator.finish_ahead();
      // A skipped action (a failed model request) leaves the search one
      // iteration short: the build is not complete, and the next one asks again.
      for (const auto& why : result.skipped) {
        ctx.failed = true;
        ctx.notes.push_back("search of " + t.id + ": skipped " + why);
      }
    } catch (const Interrupted&) {
      ctx.stopped = true;
      fresh = static_cast<int>(journal.records().size() - journaled);
      ctx.notes.push_back("search of " + t.id + " interrupted after " + std::to_string(fresh) +
                          " new evaluations");
    } catch (const TooLargeToVerify& e) {
      // Not the build's failure: this device cannot hold the call's verification.
      // Nothing is cached, so a larger device searches it.
      ctx.notes.push_back("search of " + t.id + " left out: too large to verify on this device (" + e.what() + ")");
      if (t.why.empty()) t.why = std::string("too large to verify on this device: ") + e.what();
    } catch (const std::exception& e) {
      ctx.failed = true;
      ctx.notes.push_back("search of " + t.id + " stopped: " + e.what());
      // With no evaluation, the target's report says why (a chain's `why` reads it).
      if (journal.records().size() == journaled && t.why.empty()) t.why = std::string("its search stopped: ") + e.what();
    }
    if (fresh > 0) {
      const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - started;
      ctx.search[t.id] = {{"evaluations", fresh}, {"seconds", wall.count()}, {"exhausted", exhausted}};
      if (width > 1 && want.strategies) {
        ctx.search[t.id]["compile_wait_seconds"] = evaluator.compile_wait_seconds();
        ctx.search[t.id]["compiled_ahead"] = evaluator.compiled_ahead();
      }
    }
    if (cached) {
      t.llm = cached->ledger().to_json(*want.llm);
      m_ledger += cached->ledger();
    }
  }
  report_best(ctx, t, tree);
  return 1;
}

}  // namespace forge
