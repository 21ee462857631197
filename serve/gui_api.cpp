#include "serve/gui_api.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/store_json.h"
#include "rules/improvement.h"
#include "rules/history/repo.h"

namespace forge::serve {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A request the API refuses; becomes {"error": message} with `status`.
struct ApiError : std::runtime_error {
  ApiError(int s, const std::string& m) : std::runtime_error(m), status(s) {}
  int status;
};

bool is_digest(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return std::isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

// A target id is "<model>/<op>/<sig6>": no empty, "." or ".." part, nothing
// that could leave refs/journal/.
bool is_target_id(const std::string& id) {
  if (id.empty() || id.size() > 400 || id.front() == '/' || id.back() == '/') return false;
  size_t start = 0;
  while (start <= id.size()) {
    size_t end = id.find('/', start);
    if (end == std::string::npos) end = id.size();
    std::string part = id.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (part.find_first_of("\\\0", 0, 2) != std::string::npos) return false;
    start = end + 1;
  }
  return true;
}

std::string param(const std::multimap<std::string, std::string>& params, const std::string& name) {
  auto it = params.find(name);
  if (it == params.end() || it->second.empty())
    throw ApiError(400, "missing parameter '" + name + "'");
  return it->second;
}


}  // namespace

json api_error(const std::string& message) {
  return {{"error", message}};
}

GuiApi::GuiApi(store::Store& store, ApiConfig config)
    : m_store(store), m_config(std::move(config)), m_overview(json::object()) {}

void GuiApi::set_overview(json report) {
  std::lock_guard<std::mutex> lock(m_mutex);
  m_overview = std::move(report);
}

json GuiApi::overview() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  return m_overview;
}

std::string GuiApi::redact(std::string text) const {
  for (const auto& secret : m_config.secrets) {
    if (secret.size() < 4) continue;  // "1" in env: would blank every digit; too short to be a key
    for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 3))
      text.replace(at, secret.size(), "***");
  }
  return text;
}

std::vector<std::string> GuiApi::journal_targets() const {
  std::vector<std::string> ids;
  const fs::path dir = m_config.store_root / "refs" / "journal";
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::string id = it->path().lexically_relative(dir).generic_string();
    if (id.find(".tmp.") == std::string::npos) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

ApiReply GuiApi::get(const std::string& path,
                     const std::multimap<std::string, std::string>& params) {
  ApiReply reply;
  json body;
  try {
    if (path == "/api/overview") {
      body = overview();
      body["journals"] = journal_targets();
    } else if (path == "/api/tree") {
      body = tree(param(params, "target"));
    } else if (path == "/api/node") {
      const std::string n = param(params, "node");
      if (n.size() > 9 || !std::all_of(n.begin(), n.end(), ::isdigit))
        throw ApiError(400, "node must be a non-negative integer, got '" + n + "'");
      body = node(param(params, "target"), std::stoi(n));
    } else if (path == "/api/ledger") {
      body = ledger();
    } else if (path == "/api/history") {
      body = history();
    } else if (path == "/api/history/diff") {
      body = history_diff(param(params, "rev"));
    } else if (path.rfind("/api/object/", 0) == 0) {
      const std::string digest = path.substr(12);
      if (!is_digest(digest)) throw ApiError(400, "not an object digest: '" + digest + "'");
      auto text = m_store.get_object(digest);
      if (!text) throw ApiError(404, "no object " + digest);
      body = {{"digest", digest}, {"text", *text}};
    } else {
      throw ApiError(404, "no such API route: " + path);
    }
  } catch (const ApiError& e) {
    reply.status = e.status;
    body = api_error(e.what());
  } catch (const std::exception& e) {
    reply.status = 500;
    body = api_error(e.what());
  }
  // Object text may be any bytes: replace invalid UTF-8 rather than throw.
  reply.body = redact(body.dump(-1, ' ', false, json::error_handler_t::replace));
  return reply;
}

json GuiApi::records(const std::string& target) const {
  if (!is_target_id(target)) throw ApiError(400, "not a target id: '" + target + "'");
  auto text = m_store.get_ref("journal/" + target);
  if (!text) throw ApiError(404, "no search journal for target '" + target + "'");
  json j = json::parse(*text, nullptr, false);
  if (!j.is_object() || j.value("format", "") != "forge-journal" || !j.contains("records") ||
      !j["records"].is_array())
    throw ApiError(500, "the journal of '" + target + "' is not a forge journal");
  return j;
}

json GuiApi::tree(const std::string& target) const {
  json journal = records(target);
  json nodes = json::array();
  nodes.push_back({{"id", 0},
                   {"parent", nullptr},
                   {"iteration", -1},
                   {"kind", "stock"},
                   {"what", "stock kernel"},
                   {"status", "ok"},
                   {"speedup", 1.0}});
  json progress = json::array();
  // "best" after each iteration: the kernel the target would ship then, the
  // tip of its improvement chain (rules/improvement.h), as the report and the
  // package have it; 1 (stock) until a kernel is faster than stock.
  std::vector<ChainEntry> kept;
  std::vector<double> kept_speedups;
  double best = 1.0;
  for (const auto& r : journal["records"]) {
    const json action = r.value("action", json::object());
    const json outcome = r.value("outcome", json::object());
    const json steps = outcome.value("steps", json::object());
    json speedup = outcome.contains("speedup") ? outcome["speedup"] : json(nullptr);
    nodes.push_back({{"id", r.value("node", 0)},
                     {"parent", r.value("parent", 0)},
                     {"iteration", r.value("i", 0)},
                     {"kind", action.value("kind", "")},
                     {"strategy", action.value("strategy", "")},
                     {"params", action.value("params", json::object())},
                     {"what", steps.value("what", "")},
                     {"proposer", steps.value("proposer", action.value("kind", ""))},
                     {"file", steps.value("file", "")},
                     {"status", outcome.value("status", "")},
                     {"speedup", speedup},
                     {"reason", outcome.value("reason", "")}});
    const std::string status = outcome.value("status", "");
    double s = speedup.is_number() ? speedup.get<double>() : 0;
    const json evaluation = steps.value("evaluation", json());
    if (status == "ok" && evaluation.is_string() && is_digest(evaluation.get<std::string>())) {
      ChainEntry e;
      const json race = steps.value("race", json());
      // A kernel whose record is missing is left out, as the history does.
      if (load_chain_entry(m_store, evaluation.get<std::string>(), race.is_string() ? race.get<std::string>() : "",
                           &e, nullptr)) {
        kept.push_back(std::move(e));
        kept_speedups.push_back(s);
        best = kept_speedups[improvement_chain(kept).back()];
      }
    }
    progress.push_back(
        {{"iteration", r.value("i", 0)},
         {"speedup", (status == "ok" || status == "not_faster" || status == "slower") ? json(s) : json(nullptr)},
         {"best", best}});
  }
  return {{"target", target},
          {"seconds", journal.value("seconds", 0.0)},
          {"nodes", nodes},
          {"progress", progress}};
}

json GuiApi::node(const std::string& target, int id) const {
  json journal = records(target);
  const json& recs = journal["records"];
  auto find = [&](int n) -> const json* {
    for (const auto& r : recs)
      if (r.value("node", -1) == n) return &r;
    return nullptr;
  };
  if (id == 0)
    return {{"target", target},
            {"id", 0},
            {"kind", "stock"},
            {"status", "ok"},
            {"speedup", 1.0},
            {"source", nullptr},
            {"parent_source", nullptr},
            {"evaluation", nullptr},
            {"note", "the stock ATen kernel: what every speedup is measured against"}};
  const json* r = find(id);
  if (!r) throw ApiError(404, "target '" + target + "' has no node " + std::to_string(id));
  const json outcome = r->value("outcome", json::object());
  const json steps = outcome.value("steps", json::object());
  auto object_text = [&](const json& s) -> json {
    if (!s.is_string() || !is_digest(s.get<std::string>())) return nullptr;
    auto t = m_store.get_object(s.get<std::string>());
    return t ? json(*t) : json(nullptr);
  };
  const int parent = r->value("parent", 0);
  json parent_source = nullptr, parent_file = nullptr;
  if (const json* p = find(parent)) {
    json ps = p->value("outcome", json::object()).value("steps", json::object());
    parent_source = object_text(ps.value("source", json()));
    parent_file = ps.value("file", "");
  }
  json evaluation = nullptr;
  if (steps.contains("evaluation") && steps["evaluation"].is_string() &&
      is_digest(steps["evaluation"].get<std::string>()))
    evaluation = get_json_object(m_store, steps["evaluation"].get<std::string>());
  return {{"target", target},
          {"id", id},
          {"parent", parent},
          {"iteration", r->value("i", 0)},
          {"action", r->value("action", json::object())},
          {"status", outcome.value("status", "")},
          {"speedup", outcome.contains("speedup") ? outcome["speedup"] : json(nullptr)},
          {"reason", outcome.value("reason", "")},
          {"steps", steps},
          {"file", steps.value("file", "")},
          {"source", object_text(steps.value("source", json()))},
          {"parent_file", parent_file},
          {"parent_source", parent_source},
          {"evaluation", evaluation}};
}

json GuiApi::ledger() const {
  json targets = json::array();
  long in_total = 0, out_total = 0;
  int requests = 0;
  for (const auto& id : journal_targets()) {
    json journal;
    try {
      journal = records(id);
    } catch (const ApiError&) {
      continue;
    }
    json rows = json::array();
    for (const auto& r : journal["records"]) {
      const json steps = r.value("outcome", json::object()).value("steps", json::object());
      if (!steps.contains("llm")) continue;
      // The reply-cache keys the node's requests were answered under, comma-joined
      // (rules/llm/proposer.cpp): the variant, then any repair turn.
      std::vector<std::string> keys;
      const json& llm = steps["llm"];
      if (llm.is_string()) {
        std::string all = llm.get<std::string>();
        for (size_t start = 0; start <= all.size();) {
          size_t end = all.find(',', start);
          if (end == std::string::npos) end = all.size();
          keys.push_back(all.substr(start, end - start));
          start = end + 1;
        }
      }
      long in = 0, out = 0;
      int found = 0;
      for (const auto& key : keys) {
        if (!is_digest(key)) continue;
        json rec = parse_json_entry(m_store.get_action(key));
        if (!rec.is_object()) continue;
        ++found;
        in += rec.value("input_tokens", 0L);
        out += rec.value("output_tokens", 0L);
      }
      in_total += in;
      out_total += out;
      requests += found;
      rows.push_back({{"node", r.value("node", 0)},
                      {"what", steps.value("what", "")},
                      {"status", r.value("outcome", json::object()).value("status", "")},
                      {"requests", found},
                      {"input_tokens", in},
                      {"output_tokens", out}});
    }
    if (!rows.empty()) targets.push_back({{"target", id}, {"nodes", rows}});
  }
  json cost = nullptr;
  if (m_config.price_in && m_config.price_out)
    cost = (in_total * *m_config.price_in + out_total * *m_config.price_out) / 1e6;
  return {{"targets", targets},
          {"requests", requests},
          {"input_tokens", in_total},
          {"output_tokens", out_total},
          {"cost_usd", cost}};
}

json GuiApi::history() const {
  json commits = json::array();
  std::error_code ec;
  if (!m_config.history_repo.empty() && fs::exists(m_config.history_repo, ec))
    for (const auto& c : read_history(m_config.history_repo, m_config.history_ref))
      commits.push_back({{"commit", c.commit}, {"subject", c.subject}, {"fields", c.fields}});
  return {{"ref", m_config.history_ref},
          {"repo", m_config.history_repo.string()},
          {"commits", commits}};
}

json GuiApi::history_diff(const std::string& rev) const {
  if (rev.size() > 64 || !std::all_of(rev.begin(), rev.end(), ::isxdigit))
    throw ApiError(400, "rev must be a commit sha, got '" + rev + "'");
  std::error_code ec;
  if (m_config.history_repo.empty() || !fs::exists(m_config.history_repo, ec))
    throw ApiError(404, "no history repository yet");
  bool known = false, root = false;
  const auto commits = read_history(m_config.history_repo, m_config.history_ref);
  for (size_t i = 0; i < commits.size(); ++i)
    if (commits[i].commit.rfind(rev, 0) == 0) {
      known = true;
      root = i + 1 == commits.size();
    }
  if (!known) throw ApiError(404, "no commit " + rev + " on " + m_config.history_ref);
  // The first commit has no parent: diff it against the empty tree.
  const std::string from = root ? "4b825dc642cb6eb9a060e54bf8d69288fbee4904" : rev + "~1";
  return {{"rev", rev}, {"diff", diff_history(m_config.history_repo, from, rev)}};
}

}  // namespace forge::serve
