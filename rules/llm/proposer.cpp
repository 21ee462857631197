#include "rules/llm/proposer.h"

#include <set>

#include "engine/store_json.h"
#include "rules/evaluate/judge.h"
#include "rules/llm/reply.h"
#include "util/atomic_file.h"

namespace forge {
using nlohmann::json;

namespace {

constexpr size_t kHistoryLines = 24;

std::string outcome_line(const mcts::Node& n) {
  std::string s = std::string(mcts::status_name(n.outcome.status));
  if (n.outcome.verified()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " %.3gx stock", n.outcome.speedup);
    s += buf;
  }
  if (!n.outcome.reason.empty() && !n.outcome.verified())
    s += ": " + llm::bounded(n.outcome.reason, 240);
  return s;
}

std::string node_what(const mcts::Node& n) {
  return n.id == mcts::kRoot ? "the stock kernel" : describe_action(n.action, n.parent);
}

}  // namespace

std::string describe_action(const mcts::Action& a, mcts::NodeId parent) {
  if (a.kind == "stock") return "the stock kernel";
  if (a.kind == "llm")
    return "model variant " + std::to_string(a.params.value("variant", 0) + 1) +
           (parent == mcts::kRoot ? " (from scratch)" : " of node " + std::to_string(parent));
  return "strategy " + a.strategy + " " + a.params.dump();
}

std::vector<mcts::Action> LlmProposer::actions(const mcts::Tree& tree, mcts::NodeId parent,
                                               mcts::Rng&) {
  const mcts::Node& p = tree.node(parent);
  if (parent != mcts::kRoot && (p.pending || !p.outcome.verified())) return {};
  // The note: the path from the root, then what was already tried under p.
  std::vector<std::string> lines;
  std::vector<mcts::NodeId> path;
  for (mcts::NodeId id = parent; id != mcts::kRoot; id = tree.node(id).parent) path.push_back(id);
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    const mcts::Node& n = tree.node(*it);
    lines.push_back("- ancestor node " + std::to_string(n.id) + ", " + node_what(n) + ": " +
                    outcome_line(n));
  }
  for (mcts::NodeId c : p.children) {
    const mcts::Node& n = tree.node(c);
    if (n.pending) continue;
    lines.push_back("- tried from here, node " + std::to_string(n.id) + ", " + node_what(n) + ": " +
                    outcome_line(n));
  }
  if (lines.size() > kHistoryLines)
    lines.erase(lines.begin(), lines.begin() + static_cast<long>(lines.size() - kHistoryLines));
  std::string note;
  for (const auto& l : lines) note += l + "\n";
  std::vector<mcts::Action> out;
  for (int k = 0; k < m_variants; ++k) out.push_back({"llm", "", json{{"variant", k}}, note});
  return out;
}

std::vector<mcts::Action> MixedProposer::actions(const mcts::Tree& tree, mcts::NodeId parent,
                                                 mcts::Rng& rng) {
  std::vector<std::vector<mcts::Action>> lists;
  size_t longest = 0;
  for (auto* p : m_parts) {
    lists.push_back(p->actions(tree, parent, rng));
    longest = std::max(longest, lists.back().size());
  }
  std::vector<mcts::Action> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < longest; ++i)
    for (const auto& l : lists)
      if (i < l.size() && seen.insert(mcts::action_key(l[i])).second) out.push_back(l[i]);
  return out;
}

std::string LlmEvaluator::ask(const llm::Request& r, std::vector<std::string>& keys) {
  keys.push_back(m_client.key(r));
  return m_client.complete(r).text;
}

llm::Request LlmEvaluator::first_request(const mcts::EvalRequest& req) {
  const Target& t = *m_in.target;
  store::Store& store = m_ctx.builder.store();
  llm::PromptFacts f;
  f.cuda = m_ctx.device.backend == "cuda";
  f.op = t.op;
  f.signature = t.signature;
  f.family = m_in.family->name;
  f.args = t.args.dump(1);
  f.outputs = t.outputs.dump(1);
  read_file(m_in.family->path, &f.family_yaml);
  read_file(default_targets_dir().parent_path() / "runtime" / "abi" / "forge_kernel.h",
            &f.abi_header);
  f.device_name = m_ctx.device.name;
  f.arch = m_ctx.device.arch;
  f.ceiling_bytes_per_s = m_in.ceiling_bytes_per_s;
  f.bytes = t.bytes;
  f.floor_us = t.floor_us;
  f.stock_us = t.calls > 0 ? t.time_us / static_cast<double>(t.calls) : 0;
  const json& ps = req.parent_steps;
  f.parent_what = ps.value("what", "the stock kernel");
  if (req.parent != mcts::kRoot) {
    if (auto src = store.get_object(ps.value("source", ""))) f.parent_source = *src;
    if (json rec = get_json_object(store, ps.value("evaluation", "")); rec.is_object()) {
      const json bench = rec.value("bench", json::object());
      const json cand = bench.value("candidate_us", json::object());
      if (cand.value("median", json()).is_number()) f.parent_us = cand["median"].get<double>();
      if (bench.value("speedup_eager", json()).is_number())
        f.parent_speedup = bench["speedup_eager"].get<double>();
      if (bench.value("floor_pct", json()).is_number())
        f.parent_floor_pct = bench["floor_pct"].get<double>();
    }
  } else {
    f.example_source = m_in.example_source;
  }
  f.history = req.action.parent_note;
  f.variant = req.action.params.value("variant", 0);
  f.variants = m_in.spec->variants;
  llm::Request r = llm::variant_request(*m_in.templates, f);
  r.max_tokens = m_in.spec->max_tokens;
  r.temperature = m_in.spec->temperature;
  return r;
}

LlmEvaluator::~LlmEvaluator() {
  for (auto& [at, asked] : m_asked)
    if (asked.reply.valid()) asked.reply.wait();
}

LlmEvaluator::Asked LlmEvaluator::take_first(const mcts::EvalRequest& req) {
  const int variant = req.action.params.value("variant", 0);
  if (!m_asked.count({req.parent, variant})) {
    for (int k = variant; k < m_in.spec->variants; ++k) {
      if (m_iterations > 0 && req.iteration + (k - variant) >= m_iterations) break;
      if (m_asked.count({req.parent, k})) continue;
      mcts::EvalRequest sibling = req;
      sibling.action.params["variant"] = k;
      llm::Request r = first_request(sibling);
      // The client bounds the requests in flight (its `concurrency`).
      auto reply = std::async(std::launch::async, [this, r] { return m_client.complete(r); }).share();
      m_asked.emplace(std::pair{req.parent, k}, Asked{std::move(r), std::move(reply)});
    }
  }
  auto it = m_asked.find({req.parent, variant});
  Asked asked = std::move(it->second);
  m_asked.erase(it);
  return asked;
}

mcts::Outcome LlmEvaluator::evaluate(const mcts::EvalRequest& req) {
  try {
    return evaluate_asked(req);
  } catch (const llm::LlmError& e) {
    if (!e.transient) throw;
    throw mcts::Skipped(describe_action(req.action, req.parent) + ": " + e.what() +
                        " (asked again by the next build)");
  }
}

mcts::Outcome LlmEvaluator::evaluate_asked(const mcts::EvalRequest& req) {
  const bool cuda = m_ctx.device.backend == "cuda";
  std::vector<std::string> keys;
  Asked first = take_first(req);
  llm::Request r = first.request;
  keys.push_back(m_client.key(r));
  std::string reply = first.reply.get().text;
  llm::Extracted x = llm::extract_kernel(reply);
  if (x.status != llm::Extracted::Status::Found) {
    r = llm::repair_request(
        *m_in.templates, r, reply,
        x.status == llm::Extracted::Status::NoCode
            ? "Your reply has no fenced code block."
            : "Your code does not define `extern \"C\" int forge_kernel(const forge_call* call)`.",
        x.source.empty() ? "(no code)" : x.source);
    reply = ask(r, keys);
    x = llm::extract_kernel(reply);
  }
  std::string joined;
  for (const auto& k : keys) joined += (joined.empty() ? "" : ",") + k;
  const std::string base = "llm-n" + std::to_string(req.node) + "-v" +
                           std::to_string(req.action.params.value("variant", 0) + 1);
  const json extra = {{"proposer", "llm"},
                      {"what", describe_action(req.action, req.parent)},
                      {"llm", joined}};
  if (x.status != llm::Extracted::Status::Found) {
    mcts::Outcome out;
    out.status = mcts::Outcome::Status::StaticReject;
    out.reason = "no_entry: the model's reply defines no forge_kernel (after a repair turn)";
    out.steps = extra;
    out.steps["reply"] = m_ctx.builder.store().put_object(reply);
    return out;
  }
  auto judge = [&](const std::string& text, const std::string& name, json* rec) {
    CandidateSource src{name + (cuda ? ".cu" : ".cpp"), text,
                        cuda ? CandidateLang::Cuda : CandidateLang::Cpp};
    return judge_candidate(m_ctx, m_executor, *m_in.target, *m_in.family, src, rec);
  };
  json rec;
  mcts::Outcome out = judge(x.source, base, &rec);
  if (!out.verified()) {
    const std::string reason = rec.value("reason", "");
    std::string problem, detail;
    if (reason == "static_check") {
      problem = "forge's static check rejected the file:";
      for (const auto& v : rec.value("static", json::array()))
        detail += "line " + std::to_string(v.value("line", 0)) + " [" + v.value("rule", "") +
                  "] " + v.value("text", "") + " -- " + v.value("rationale", "") + "\n";
    } else if (reason == "compile_error") {
      problem = "It does not compile:";
      detail = rec.value("compile", json::object()).value("log", "");
    } else {
      problem = "The verifier rejected it (" + reason + "):";
      detail = rec.value("detail", "") + "\n" + rec.value("verify", json::object()).dump();
    }
    r = llm::repair_request(*m_in.templates, r, reply, problem, detail);
    reply = ask(r, keys);
    llm::Extracted fixed = llm::extract_kernel(reply);
    if (fixed.status == llm::Extracted::Status::Found) out = judge(fixed.source, base + "-fix", &rec);
    joined.clear();
    for (const auto& k : keys) joined += (joined.empty() ? "" : ",") + k;
  }
  for (const auto& [k, v] : extra.items()) out.steps[k] = v;
  out.steps["llm"] = joined;
  return out;
}

}  // namespace forge
