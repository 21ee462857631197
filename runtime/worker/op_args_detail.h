// Small helpers the pieces of the op's torch side share (op_spec, cases,
// abi_views, compare; op_args.h lists them): request errors, contiguous
// strides, number text, the capture's dtype names (runtime/common/dtypes_torch.h), a
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

#include "../common/dtypes_torch.h"
#include "compare_rule.h"
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

inline std::string fmt(double v, int digits = 6) { return number_text(v, digits); }

// The dtype table (runtime/common/dtypes.h) on the torch side.
inline std::optional<c10::ScalarType> parse_dtype(const std::string& s) { return dtypes::scalar_type(s); }
inline std::string dtype_text(c10::ScalarType t) { return dtypes::name_of(t); }

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
