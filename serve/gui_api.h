// The JSON API behind `forge serve` (docs/GUI.md): read-only views over one
// local store and the history repository. No HTTP here, so every route is
// tested as a function call (tests/serve/test_gui_api.cpp); serve/gui_server.h
// puts it behind cpp-httplib.
//
// Routes (GET; query parameters, so target ids with '/' need no escaping rules):
//   /api/overview                  device, models, targets (time share, best
//                                  speedup over eager and torch.compile, % of floor,
//                                  outcomes, selection and why), not_selected (every
//                                  other captured op with its reason, docs/SELECTION.md),
//                                  notes: the last dry-run snapshot
//   /api/tree?target=ID            the search tree from the target's journal:
//                                  {"target", "nodes": [{id, parent, iteration, kind,
//                                  strategy, params, what, proposer, status, speedup,
//                                  reason}], "progress": [{iteration, speedup, best}]}
//   /api/node?target=ID&node=N     one node: its source, the parent's source, the
//                                  evaluation record (compile log, verification,
//                                  benchmark beside the baselines and the floor)
//   /api/ledger                    LLM requests per target from the reply cache
//                                  (tokens, cost when forge.yaml sets prices)
//   /api/history                   accepted kernels' commits on the history ref
//   /api/history/diff?rev=SHA      that commit's kernel diff against its parent
//   /api/object/DIGEST             a store object as text (64 lower-case hex only)
//
// Every reply is JSON, errors too: {"error": "..."} with 400 (bad parameter),
// 404 (unknown route, target, node or object) or 500. Every reply body passes
// through redact(): each secret (the values of forge.yaml's env: and of the
// variable llm.api_key_env names) is replaced by "***" before it leaves.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "store/store.h"

namespace forge::serve {

struct ApiReply {
  int status = 200;
  std::string body;  // JSON text, already redacted
};

struct ApiConfig {
  std::filesystem::path store_root;    // the local store's folder (refs are listed there)
  std::filesystem::path history_repo;  // "" when there is none yet
  std::string history_ref = "refs/heads/forge/kernels";
  std::vector<std::string> secrets;           // values never to show (empty ones are ignored)
  std::optional<double> price_in, price_out;  // USD per million tokens (ledger)
};

class GuiApi {
 public:
  GuiApi(store::Store& store, ApiConfig config);

  // path: "/api/..." without the query; params: the decoded query parameters.
  ApiReply get(const std::string& path, const std::multimap<std::string, std::string>& params);

  // The overview snapshot (a `forge status --all --json`-shaped report); thread-safe.
  void set_overview(nlohmann::json report);

  // Target ids that have a journal, from <store>/refs/journal/.
  std::vector<std::string> journal_targets() const;

  std::string redact(std::string text) const;

 private:
  nlohmann::json overview() const;
  nlohmann::json tree(const std::string& target) const;
  nlohmann::json node(const std::string& target, int id) const;
  nlohmann::json ledger() const;
  nlohmann::json history() const;
  nlohmann::json history_diff(const std::string& rev) const;
  nlohmann::json records(const std::string& target) const;  // the journal's records

  store::Store& m_store;
  ApiConfig m_config;
  mutable std::mutex m_mutex;
  nlohmann::json m_overview;
};

// An error reply's body, before redaction: {"error": message}.
nlohmann::json api_error(const std::string& message);

}  // namespace forge::serve
