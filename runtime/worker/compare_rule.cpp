// The comparison's torch-free rule (compare_rule.h).
#include "compare_rule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace forge::worker {

Tolerance tolerance_for(const Family& family, std::string_view out, bool out_floating,
                        std::optional<std::string_view> in) {
  auto lookup = [&](std::string_view name) -> std::optional<Tolerance> {
    const std::string key(name);
    if (!family.tolerance.contains(key)) return std::nullopt;
    const json& e = family.tolerance[key];
    if (!e.is_object()) return std::nullopt;
    return Tolerance{e.value("atol", 0.0), e.value("rtol", 0.0)};
  };
  if (!out_floating) return Tolerance{0, 0};
  if (auto t = lookup(out)) return *t;
  if (in)
    if (auto t = lookup(*in)) return *t;
  if (out == "float64") return {1e-12, 1e-10};
  if (out == "float16") return {1e-3, 1e-3};
  if (out == "bfloat16") return {4e-3, 1.6e-2};
  return {1e-6, 1e-5};
}

std::string number_text(double v, int digits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string index_text(std::span<const int64_t> sizes, int64_t flat) {
  std::vector<int64_t> idx(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    int64_t s = std::max<int64_t>(sizes[static_cast<size_t>(d)], 1);
    idx[static_cast<size_t>(d)] = flat % s;
    flat /= s;
  }
  std::string out = "[";
  for (size_t d = 0; d < idx.size(); ++d) {
    if (d) out += ',';
    out += std::to_string(idx[d]);
  }
  out += ']';
  return out;
}

}  // namespace forge::worker
