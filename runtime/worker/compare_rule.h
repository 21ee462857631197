// The comparison's torch-free rule (compare.h applies it to tensors): which
// tolerance an output is held to, and how a detail text writes numbers and
// element indices. Torch-free, so forge's unit tests check it directly.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "family_params.h"

namespace forge::worker {

// The tolerance of an output: |out - ref| <= atol + rtol |ref|.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

// The tolerance of an output of dtype `out` (a dtype name, runtime/common/
// dtypes.h): none for a non-floating output (exact match); else the family's
// entry for `out`, else its entry for `in` (the first floating input's
// dtype), else a default per `out` (float64 1e-12/1e-10, float16 1e-3/1e-3,
// bfloat16 4e-3/1.6e-2, any other 1e-6/1e-5).
Tolerance tolerance_for(const Family& family, std::string_view out, bool out_floating,
                        std::optional<std::string_view> in);

// A number for detail texts: %.*g with `digits`, and nan, inf, -inf.
std::string number_text(double v, int digits = 6);

// A flat (row-major) index as "[i,j,...]" over sizes; a size 0 counts as 1.
std::string index_text(std::span<const int64_t> sizes, int64_t flat);

}  // namespace forge::worker
