// Small helpers the pieces of the op's torch side share (op_spec, cases,
// abi_views, compare; op_args.h lists them): request errors, contiguous
// strides, number text, the capture's dtype names with their ABI codes, a
// tensor's byte extent, its distinct elements and its bits. Internal to those
// pieces: nothing else includes it.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "evaluator.h"
#include "forge_kernel.h"

namespace forge::worker::detail {

[[noreturn]] inline void bad(const std::string& what) { throw RequestError(what); }

inline std::vector<int64_t> contiguous(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = s;
    s *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

inline std::string fmt(double v, int digits = 6) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

struct DtypeName {
  const char* name;
  c10::ScalarType type;
  int32_t forge;  // -1: not in the ABI
};
inline constexpr DtypeName kDtypes[] = {
    {"float32", c10::ScalarType::Float, FORGE_FLOAT32},   {"float64", c10::ScalarType::Double, FORGE_FLOAT64},
    {"float16", c10::ScalarType::Half, FORGE_FLOAT16},    {"bfloat16", c10::ScalarType::BFloat16, FORGE_BFLOAT16},
    {"int64", c10::ScalarType::Long, FORGE_INT64},        {"int32", c10::ScalarType::Int, FORGE_INT32},
    {"int16", c10::ScalarType::Short, FORGE_INT16},       {"int8", c10::ScalarType::Char, FORGE_INT8},
    {"uint8", c10::ScalarType::Byte, FORGE_UINT8},        {"bool", c10::ScalarType::Bool, FORGE_BOOL},
    {"complex64", c10::ScalarType::ComplexFloat, -1},     {"complex128", c10::ScalarType::ComplexDouble, -1},
    {"uint16", c10::ScalarType::UInt16, -1},              {"uint32", c10::ScalarType::UInt32, -1},
    {"uint64", c10::ScalarType::UInt64, -1},              {"float8_e5m2", c10::ScalarType::Float8_e5m2, -1},
    {"float8_e4m3fn", c10::ScalarType::Float8_e4m3fn, -1},
};

inline std::optional<c10::ScalarType> parse_dtype(const std::string& s) {
  for (const auto& d : kDtypes)
    if (s == d.name) return d.type;
  return std::nullopt;
}

inline std::string dtype_text(c10::ScalarType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.name;
  return c10::toString(t);
}

inline int64_t extent_bytes(at::IntArrayRef sizes, at::IntArrayRef strides, int64_t elem) {
  int64_t span = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    span += (sizes[d] - 1) * std::abs(strides[d]);
  }
  return span * elem;
}

// The view of t that covers every distinct element once: dims with stride 0
// (broadcast) are narrowed to one element, so fills and copies never write the
// same memory twice.
inline at::Tensor distinct_view(at::Tensor t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) == 0 && t.size(d) > 1) t = t.narrow(d, 0, 1);
  return t;
}

inline at::Tensor bits(const at::Tensor& t) {
  switch (t.element_size()) {
    case 1: return t.view(at::kByte);
    case 2: return t.view(at::kShort);
    case 4: return t.view(at::kInt);
    case 8: return t.view(at::kLong);
    default: return t;
  }
}

}  // namespace forge::worker::detail
