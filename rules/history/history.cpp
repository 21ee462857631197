#include "rules/history/history.h"

#include <cstdio>

#include "engine/store_json.h"
#include "rules/improvement.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string fmt(const char* pattern, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, pattern, x);
  return buf;
}

std::string fmt_or_null(const json& v, const char* pattern) {
  return v.is_number() ? fmt(pattern, v.get<double>()) : "null";
}

json number_or_null(const json& obj, const char* key) {
  return obj.contains(key) && obj[key].is_number() ? obj[key] : json(nullptr);
}

std::string timing_line(const json& t) {
  if (!t.is_object()) return "null";
  return "median " + fmt_or_null(t.value("median", json()), "%.3f") + ", spread " +
         fmt_or_null(t.value("spread", json()), "%.3f");
}

std::string verify_line(const json& v) {
  if (!v.is_object()) return "null";
  return std::to_string(v.value("cases", 0)) + " cases, worst_rel " +
         fmt_or_null(v.value("worst_rel", json()), "%.3g") + ", worst_tol " +
         fmt_or_null(v.value("worst_tol", json()), "%.3g");
}

// This kernel's speedup over torch.compile (rules/evaluate/compile_baseline.h); null
// when unknown.
json speedup_compile(const Target& t, const json& bench) {
  const double sp = bench.value("speedup_eager", 0.0);
  if (!t.compile_over_eager || sp <= 0) return nullptr;
  return sp * *t.compile_over_eager;
}

// Only deterministic content: what the store holds and what was probed, no clock.
HistoryEntry make_entry(const BuildContext& ctx, const Target& t, const KernelRecord& k,
                        const json& rec, std::string source) {
  const json bench = rec.value("bench", json::object());
  const std::string proposer = k.proposer + ":" + k.strategy + " " + k.params.dump();
  const Toolchain& tc = ctx.toolchain;
  HistoryEntry e;
  e.target = t.id;
  e.file = k.file;
  e.source = std::move(source);
  e.result = {
      {"target", t.id},
      {"model", t.model},
      {"op", t.op},
      {"signature", t.signature},
      {"kernel", k.file},
      {"speedup_eager", number_or_null(bench, "speedup_eager")},
      {"speedup_compile", speedup_compile(t, bench)},
      {"compile_us", t.compile_us ? json(*t.compile_us) : json(nullptr)},
      {"compile_mode", t.compile_mode.empty() ? json(nullptr) : json(t.compile_mode)},
      {"floor_pct", number_or_null(bench, "floor_pct")},
      {"candidate_us", bench.value("candidate_us", json())},
      {"eager_us", bench.value("eager_us", json())},
      {"verify", rec.value("verify", json())},
      {"device",
       {{"backend", ctx.device.backend},
        {"name", ctx.device.name},
        {"arch", ctx.device.arch},
        {"driver", ctx.device.driver}}},
      {"toolchain",
       {{"fingerprint", tc.fingerprint()},
        {"python", tc.python_version},
        {"torch", tc.torch_version},
        {"torch_cuda", tc.torch_cuda},
        {"cxx", tc.cxx},
        {"nvcc", tc.nvcc}}},
      {"proposer", proposer},
      {"iteration", k.iteration},
      {"node", k.node},
      {"parent", k.parent},
  };
  const json& r = e.result;
  e.summary = fmt_or_null(r["speedup_eager"], "%.2f") + "x over eager (" + k.strategy + " " +
              k.params.dump() + ")";
  e.fields = {
      {"signature", t.signature},
      {"kernel", k.file},
      {"proposer", proposer},
      {"iteration", std::to_string(k.iteration)},
      {"parent", std::to_string(k.parent)},
      {"speedup_eager", fmt_or_null(r["speedup_eager"], "%.3f")},
      {"speedup_compile", fmt_or_null(r["speedup_compile"], "%.3f")},
      {"floor_pct", fmt_or_null(r["floor_pct"], "%.1f")},
      {"candidate_us", timing_line(r["candidate_us"])},
      {"eager_us", timing_line(r["eager_us"])},
      {"verify", verify_line(r["verify"])},
      {"device", ctx.device.backend + " " + ctx.device.name + " " + ctx.device.arch +
                     (ctx.device.driver.empty() ? "" : " driver " + ctx.device.driver)},
  };
  return e;
}

}  // namespace

std::vector<HistoryEntry> history_entries(BuildContext& ctx) {
  std::vector<HistoryEntry> entries;
  store::Store& store = ctx.builder.store();
  for (const Target& t : ctx.targets) {
    std::vector<const KernelRecord*> kernels;
    std::vector<json> records;
    std::vector<std::string> sources;
    for (const KernelRecord& k : t.kernels) {
      auto source = store.get_object(k.source);
      json rec = get_json_object(store, k.evaluation);
      if (!source || !rec.is_object()) {
        ctx.notes.push_back("history: the records of " + t.id + " " + k.file +
                            " are missing from the store; not committed");
        continue;
      }
      kernels.push_back(&k);
      records.push_back(std::move(rec));
      sources.push_back(std::move(*source));
    }
    std::vector<ChainEntry> chain;
    for (size_t i = 0; i < records.size(); ++i) {
      ChainEntry e;
      load_chain_entry(store, kernels[i]->evaluation, kernels[i]->race, &e, nullptr);
      chain.push_back(std::move(e));
    }
    for (size_t i : improvement_chain(chain))
      entries.push_back(make_entry(ctx, t, *kernels[i], records[i], std::move(sources[i])));
  }
  return entries;
}

void HistoryRule::apply(BuildContext& ctx) {
  if (ctx.options.dry_run || ctx.targets.empty()) return;
  const std::string& ref = ctx.manifest.history.ref;
  try {
    std::vector<HistoryEntry> entries = history_entries(ctx);
    fs::path repo = locate_history_repo(ctx.manifest, !entries.empty());
    if (repo.empty()) {  // nothing accepted and nowhere to look
      ctx.history = {{"ref", ref}, {"repo", nullptr}, {"commits_added", 0}, {"tip", nullptr}};
      return;
    }
    HistoryResult r = commit_history(repo, ref, entries);
    ctx.history = {{"ref", r.ref},
                   {"repo", r.repo.string()},
                   {"commits_added", r.commits_added},
                   {"tip", r.tip.empty() ? json(nullptr) : json(r.tip)}};
  } catch (const std::exception& e) {
    // Accepted kernels that are not in git are not shipped: the build failed.
    ctx.failed = true;
    ctx.notes.push_back(std::string("history: ") + e.what());
  }
}

}  // namespace forge
