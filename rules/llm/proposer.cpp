#include "rules/llm/proposer.h"

#include <algorithm>
#include <set>

#include "engine/device_facts.h"
#include "engine/store_json.h"
#include "rules/evaluate/judge.h"
#include "rules/llm/reply.h"
#include "util/atomic_file.h"

namespace forge {
using nlohmann::json;

namespace {

constexpr size_t kHistoryLines = 24;
constexpr size_t kElsewhereLines = 3;

// A step's string value ("" when absent): a digest, or the model's idea.
std::string digest_of(const mcts::Node& n, const char* step) {
  auto it = n.outcome.steps.find(step);
  return it != n.outcome.steps.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string outcome_line(const mcts::Node& n) {
  std::string s = std::string(mcts::status_name(n.outcome.status));
  if (n.outcome.verified()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " %.3gx stock", n.outcome.speedup);
    s += buf;
  }
  if (!n.outcome.reason.empty() && !n.outcome.verified())
    s += ": " + llm::bounded(n.outcome.reason, 240);
  const std::string idea = digest_of(n, "idea");
  if (!idea.empty()) s += "; idea: " + idea;
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
  // The note, JSON that first_request reads: {"tried": the path from the root,
  // then what was already tried under p, one line each; "elsewhere": the
  // fastest verified kernels off the path; "elsewhere_what"/"elsewhere_source"
  // (a digest): the fastest of them, when it beats p; "stock_evaluation" (a
  // digest) and "stock_node": the first verified node's evaluation, whose
  // bench.eager_us is stock as the benchmark measures it}.
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
  json note = json::object();
  std::string tried;
  for (const auto& l : lines) tried += l + "\n";
  if (!tried.empty()) note["tried"] = tried;

  std::vector<const mcts::Node*> off_path;
  for (const auto& n : tree.nodes()) {
    if (n.id == mcts::kRoot || n.pending || !n.outcome.verified()) continue;
    if (!note.contains("stock_evaluation") && !digest_of(n, "evaluation").empty()) {
      note["stock_evaluation"] = digest_of(n, "evaluation");
      note["stock_node"] = n.id;
    }
    if (n.id != parent && std::find(path.begin(), path.end(), n.id) == path.end())
      off_path.push_back(&n);
  }
  std::stable_sort(off_path.begin(), off_path.end(), [](const mcts::Node* a, const mcts::Node* b) {
    return a->outcome.speedup > b->outcome.speedup;
  });
  if (off_path.size() > kElsewhereLines) off_path.resize(kElsewhereLines);
  std::string elsewhere;
  for (const mcts::Node* n : off_path)
    elsewhere += "- node " + std::to_string(n->id) + ", " + node_what(*n) + ": " + outcome_line(*n) + "\n";
  if (!elsewhere.empty()) note["elsewhere"] = elsewhere;
  const double parent_speedup = parent == mcts::kRoot ? 1.0 : p.outcome.speedup;
  if (!off_path.empty() && off_path.front()->outcome.speedup > parent_speedup &&
      !digest_of(*off_path.front(), "source").empty()) {
    note["elsewhere_what"] = "node " + std::to_string(off_path.front()->id) + ", " + node_what(*off_path.front());
    note["elsewhere_source"] = digest_of(*off_path.front(), "source");
  }
  const std::string text = note.empty() ? "" : note.dump();
  std::vector<mcts::Action> out;
  for (int k = 0; k < m_variants; ++k) out.push_back({"llm", "", json{{"variant", k}}, text});
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

namespace {

// 1 << forge_dtype (runtime/abi/forge_kernel.h) of every float tensor among the
// capture's records, nested lists included.
unsigned float_dtypes(const json& records) {
  unsigned mask = 0;
  if (records.is_array()) {
    for (const auto& r : records) mask |= float_dtypes(r);
  } else if (records.is_object()) {
    const std::string d = records.value("dtype", "");
    if (d == "float32") mask |= 1u << 0;
    if (d == "float64") mask |= 1u << 1;
    if (d == "float16") mask |= 1u << 2;
    if (d == "bfloat16") mask |= 1u << 3;
    for (const auto& [k, v] : records.items())
      if (v.is_structured()) mask |= float_dtypes(v);
  }
  return mask;
}

// One record per line: short enough to read, no indentation to pay for.
std::string json_lines(const json& j) {
  if (!j.is_array() || j.empty()) return j.dump() + "\n";
  std::string s = "[\n";
  for (size_t i = 0; i < j.size(); ++i) s += " " + j[i].dump() + (i + 1 < j.size() ? ",\n" : "\n");
  return s + "]\n";
}

std::optional<llm::Timing> timing_of(const json& bench, const char* key) {
  const json t = bench.value(key, json::object());
  if (!t.is_object() || !t.value("median", json()).is_number()) return std::nullopt;
  return llm::Timing{t["median"].get<double>(), t.value("spread", 0.0)};
}

}  // namespace

llm::Request LlmEvaluator::first_request(const mcts::EvalRequest& req) {
  const Target& t = *m_in.target;
  store::Store& store = m_ctx.builder.store();
  llm::PromptFacts f;
  f.cuda = m_ctx.device.backend == "cuda";
  f.op = t.op;
  f.signature = t.signature;
  f.family = m_in.family->derived ? "derived from the captured call: no family.yaml covers this op"
                                  : "targets/" + m_in.family->name + "/family.yaml";
  f.args = json_lines(t.args);
  f.outputs = json_lines(t.outputs);
  f.dtypes = float_dtypes(t.args) | float_dtypes(t.outputs);
  f.family_yaml = m_in.family->text;
  read_file(default_targets_dir().parent_path() / "runtime" / "abi" / "forge_kernel.h",
            &f.abi_header);
  f.device_name = m_ctx.device.name;
  f.arch = m_ctx.device.arch;
  const DeviceFacts facts = probe_device_facts(m_ctx.runner, m_ctx.device);
  f.device_facts = facts.describe();
  f.isa = facts.isa;
  f.ceiling_bytes_per_s = m_in.ceiling_bytes_per_s;
  f.bytes = t.bytes;
  f.floor_us = t.floor_us;
  f.capture_us = t.calls > 0 ? t.time_us / static_cast<double>(t.calls) : 0;
  // The note (LlmProposer::actions): JSON; plain text from older journals is the history.
  const json note = json::parse(req.action.parent_note, nullptr, false);
  if (note.is_object()) {
    f.history = note.value("tried", "");
    f.elsewhere = note.value("elsewhere", "");
    const std::string elsewhere_source = note.value("elsewhere_source", "");
    if (auto src = elsewhere_source.empty() ? std::nullopt : store.get_object(elsewhere_source)) {
      f.elsewhere_source = *src;
      f.elsewhere_what = note.value("elsewhere_what", "");
    }
  } else {
    f.history = req.action.parent_note;
  }
  // Stock as the benchmark measured it: the parent's evaluation, else any in the tree.
  auto stock_from = [&](const json& rec, const std::string& from) {
    const json bench = rec.value("bench", json::object());
    if (f.stock || !bench.is_object()) return;
    f.stock = timing_of(bench, "eager_us");
    if (!f.stock) return;
    f.stock_from = from;
    if (bench.value("threads", json()).is_number_integer()) f.stock_threads = bench["threads"].get<int>();
  };
  const json& ps = req.parent_steps;
  f.parent_what = ps.value("what", "the stock kernel");
  if (!ps.value("idea", "").empty()) f.parent_what += " (its idea: " + ps.value("idea", "") + ")";
  if (req.parent != mcts::kRoot) {
    const std::string parent_source = ps.value("source", "");
    if (!parent_source.empty())
      if (auto src = store.get_object(parent_source)) f.parent_source = *src;
    if (json rec = get_json_object(store, ps.value("evaluation", "")); rec.is_object()) {
      const json bench = rec.value("bench", json::object());
      f.parent = timing_of(bench, "candidate_us");
      if (bench.value("speedup_eager", json()).is_number())
        f.parent_speedup = bench["speedup_eager"].get<double>();
      if (bench.value("floor_pct", json()).is_number())
        f.parent_floor_pct = bench["floor_pct"].get<double>();
      const json hot = bench.value("hot", json::object());
      if (hot.is_object() && hot.value("speedup_eager", json()).is_number())
        f.parent_hot_speedup = hot["speedup_eager"].get<double>();
      stock_from(rec, "the parent's evaluation");
    }
  } else {
    f.example_source = m_in.example_source;
  }
  if (!f.stock && note.is_object() && note.contains("stock_evaluation"))
    stock_from(get_json_object(store, note.value("stock_evaluation", "")),
               "node " + std::to_string(note.value("stock_node", 0)) + "'s evaluation");
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
  const std::string idea = llm::idea_of(reply);  // the first reply's, shown to later variants
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
                      {"llm", joined},
                      {"idea", idea}};
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
