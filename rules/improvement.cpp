#include "rules/improvement.h"

#include "engine/store_json.h"

namespace forge {
using nlohmann::json;

BenchTime candidate_time(const json& rec) {
  const json c = rec.value("bench", json::object()).value("candidate_us", json::object());
  return {c.value("median", 0.0), c.value("spread", 0.0)};
}

std::vector<size_t> improvement_chain(const std::vector<BenchTime>& times) {
  std::vector<size_t> chain;
  for (size_t i = 0; i < times.size(); ++i) {
    if (!chain.empty()) {
      const BenchTime& best = times[chain.back()];
      if (best.median - times[i].median <= best.spread + times[i].spread) continue;
    }
    chain.push_back(i);
  }
  return chain;
}

std::optional<size_t> shipped_kernel_index(store::Store& store, const Target& t, std::vector<json>* records) {
  std::vector<BenchTime> times;
  records->clear();
  for (const auto& k : t.kernels) {
    json rec = get_json_object(store, k.evaluation);
    if (!rec.is_object()) return std::nullopt;
    times.push_back(candidate_time(rec));
    records->push_back(std::move(rec));
  }
  auto chain = improvement_chain(times);
  if (chain.empty()) return std::nullopt;
  return chain.back();
}

}  // namespace forge
