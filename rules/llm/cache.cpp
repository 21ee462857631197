#include "rules/llm/cache.h"

#include <algorithm>

#include "util/hash.h"

namespace forge::llm {
using nlohmann::json;

void Ledger::add(const Request& q, const Reply& r) {
  long chars = static_cast<long>(q.system.size());
  for (const auto& m : q.messages) chars += static_cast<long>(m.text.size());
  prompt_chars += chars;
  largest_prompt_chars = std::max(largest_prompt_chars, chars);
  if (r.cached) {
    ++cached;
    return;
  }
  ++requests;
  input_tokens += r.usage.input_tokens;
  output_tokens += r.usage.output_tokens;
}

Ledger& Ledger::operator+=(const Ledger& o) {
  requests += o.requests;
  cached += o.cached;
  input_tokens += o.input_tokens;
  output_tokens += o.output_tokens;
  prompt_chars += o.prompt_chars;
  largest_prompt_chars = std::max(largest_prompt_chars, o.largest_prompt_chars);
  return *this;
}

json Ledger::to_json(const LlmSpec& spec) const {
  json cost = nullptr;
  if (spec.price_in && spec.price_out)
    cost = (static_cast<double>(input_tokens) * *spec.price_in +
            static_cast<double>(output_tokens) * *spec.price_out) / 1e6;
  return {{"provider", spec.provider},
          {"model", spec.provider == "command" ? json(nullptr) : json(spec.model)},
          {"requests", requests},
          {"cached", cached},
          {"input_tokens", input_tokens},
          {"output_tokens", output_tokens},
          {"prompt_chars", {{"total", prompt_chars}, {"largest", largest_prompt_chars}}},
          {"cost_usd", cost}};
}

std::string CachedClient::key(const Request& request) const {
  Hasher h;
  h.add("kind", "llm-reply").add("version", kReplyCacheVersion)
      .add("identity", m_inner.identity().dump()).add("request", request.to_json().dump());
  return h.hex();
}

Reply CachedClient::complete(const Request& request) {
  const std::string k = key(request);
  if (auto rec = m_store.get_action(k)) {
    json j = json::parse(*rec, nullptr, false);
    if (j.is_object() && j.value("text", json()).is_string()) {
      Reply r;
      r.text = j["text"].get<std::string>();
      r.usage = {j.value("input_tokens", 0L), j.value("output_tokens", 0L)};
      r.cached = true;
      std::lock_guard<std::mutex> lock(m_mutex);
      m_ledger.add(request, r);
      return r;
    }
  }
  Reply r = m_inner.complete(request);
  json rec = {{"text", r.text},
              {"input_tokens", r.usage.input_tokens},
              {"output_tokens", r.usage.output_tokens},
              {"request", m_store.put_object(request.to_json().dump())}};
  m_store.put_action(k, rec.dump());
  std::lock_guard<std::mutex> lock(m_mutex);
  m_ledger.add(request, r);
  return r;
}

Ledger CachedClient::ledger() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  return m_ledger;
}

}  // namespace forge::llm
