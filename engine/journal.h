// The search journal of one target: an append-only list of records, one per
// completed MCTS iteration, from which run_search rebuilds the tree exactly
// (same seed + same recorded outcomes -> the same tree). The steps a record
// names (proposal, compile, evaluation) are content-addressed in the action
// cache; the journal only says which were taken, in which order, with what
// outcome. Like everything in the store it is a rebuildable cache: losing it
// costs a replay of cached steps, not their work.
//
// Storage: one store ref (journal_ref(target id) = "journal/<target id>") whose
// value is the whole journal as one JSON document, rewritten atomically after
// every completed iteration (flush per record; refs are replaced whole and carry
// a checksum in the local store, so a reader sees the old or the new journal,
// never a torn one). Format, version 2:
//
//   {"format": "forge-journal",     magic: anything else is not a journal
//    "version": 2,                  kJournalVersion; 1 is read too, another -> start over
//    "context": "<string>",         the caller's key over what outcomes depend on
//                                   (target, device, toolchain, proposer, evaluation
//                                   settings); another context -> start over
//    "search": {"seed", "exploration", "widening_k", "widening_alpha"},
//                                   SearchParams::to_json(); other settings -> start over
//    "seconds": 12.5,               search time spent on the target over all runs
//                                   (the only field that depends on timing)
//    "records": [
//      {"i": 0,                     iteration, == index in the list
//       "node": 1,                  == i + 1 (one node per iteration; the root is 0)
//       "parent": 0,                0 <= parent < node
//       "action": {"kind", "strategy", "params", "note"},
//       "outcome": {"status": "ok" | "not_faster" | "compile_error" | "static_reject" |
//                             "wrong_result" | "crash" | "timeout",
//                   "speedup": 1.37,   verified statuses only; finite, > 0
//                   "reason": "...",   only when not empty
//                   "steps": {"compile": "<key>", ...}}}, ...]}
//
// Objects are written with sorted keys and shortest round-trip numbers, so the
// same records give byte-identical text and replayed doubles are bit-identical.
// Anything that does not parse or check -- a truncated value, a wrong field, a
// record out of sequence -- is a warning and an empty journal (start over); the
// steps are still in the action cache, so redoing them is cheap.
//
// Limit: the value is rewritten whole per iteration (records are ~300-600 bytes),
// so n iterations write O(n^2) bytes: fine up to a few thousand iterations per
// target (1,000 -> ~0.5 MB per write). Beyond that, chunk it (new version).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/mcts.h"
#include "store/store.h"

namespace forge::mcts {

inline constexpr int kJournalVersion = 2;
// The oldest version still read: 1 named NotFaster "slower" (mcts::parse_status
// reads both); written back as the current version.
inline constexpr int kOldestJournalVersion = 1;
inline constexpr const char* kJournalFormat = "forge-journal";

struct JournalRecord {
  int iteration = 0;
  NodeId node = 1;
  NodeId parent = kRoot;
  Action action;
  Outcome outcome;
};

struct JournalData {
  double seconds = 0;
  std::vector<JournalRecord> records;
};

// "journal/<target id>".
std::string journal_ref(const std::string& target_id);

// The text stored for `data` (deterministic).
std::string format_journal(const JournalData& data, const std::string& context,
                           const nlohmann::json& search_params);

// Parses and checks a journal's text against the expected context and search
// settings. nullopt and *why (one line) when it is unusable; never throws.
std::optional<JournalData> parse_journal(std::string_view text, const std::string& context,
                                         const nlohmann::json& search_params, std::string* why);

class Journal {
 public:
  // Loads the journal under `ref`. Missing -> empty, silently. Unusable -> warn
  // "search journal '<ref>' <why>; starting over" and empty (the stale value is
  // replaced on the first append or reset).
  Journal(store::Store& store, std::string ref, std::string context, nlohmann::json search_params,
          store::WarnFn warn);

  const std::string& ref() const { return m_ref; }
  const std::string& context() const { return m_context; }
  const nlohmann::json& search_params() const { return m_params; }
  const std::vector<JournalRecord>& records() const { return m_data.records; }
  double seconds() const { return m_data.seconds; }

  // Appends one record (it must be the next: iteration == size, node == size + 1)
  // and writes the whole journal with `seconds` as the time spent so far.
  void append(const JournalRecord& record, double seconds);

  // Warns "search journal '<ref>' <why>; starting over", forgets every record and
  // writes the empty journal.
  void reset(const std::string& why);

  std::string text() const;  // what is (or would be) stored

 private:
  void write();

  store::Store& m_store;
  std::string m_ref;
  std::string m_context;
  nlohmann::json m_params;
  store::WarnFn m_warn;
  JournalData m_data;
};

}  // namespace forge::mcts
