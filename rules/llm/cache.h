// Replies cached in the store, and what they cost.
//
// CachedClient answers a request it has seen from the store's action cache, so
// replaying or rebuilding a tree costs nothing and gives the same kernels. Key:
// Hasher over kind "llm-reply", kReplyCacheVersion, the client's identity
// (provider, model, base_url, or the command line) and the whole request
// (system text, every message, max_tokens, temperature, variant). Never the API
// key: it is not an input of the answer, and nothing keyed on it may be stored.
// Record: {"text", "input_tokens", "output_tokens", "request": <object digest of
// the request JSON>}. Failures are not cached (the next build asks again).
#pragma once

#include <mutex>

#include "rules/llm/client.h"
#include "store/store.h"

namespace forge::llm {

inline constexpr const char* kReplyCacheVersion = "1";

// Tokens and money of the requests a build actually sent (cached replies are
// counted apart and cost nothing), and the size of every prompt it asked.
struct Ledger {
  int requests = 0;  // sent to the provider
  int cached = 0;    // answered from the store
  long input_tokens = 0;
  long output_tokens = 0;
  // Characters of the prompts asked, sent or cached: system text plus every
  // message; the sum and the largest single prompt.
  long prompt_chars = 0;
  long largest_prompt_chars = 0;

  void add(const Request& q, const Reply& r);
  Ledger& operator+=(const Ledger& o);
  // {"provider", "model", "requests", "cached", "input_tokens", "output_tokens",
  //  "prompt_chars": {"total", "largest"},
  //  "cost_usd": null unless both prices are set in forge.yaml}
  nlohmann::json to_json(const LlmSpec& spec) const;
};

class CachedClient : public Client {
 public:
  CachedClient(Client& inner, store::Store& store) : m_inner(inner), m_store(store) {}
  Reply complete(const Request& request) override;  // adds to ledger()
  nlohmann::json identity() const override { return m_inner.identity(); }
  std::string key(const Request& request) const;
  Ledger ledger() const;

 private:
  Client& m_inner;
  store::Store& m_store;
  mutable std::mutex m_mutex;
  Ledger m_ledger;
};

}  // namespace forge::llm
