// The capture's partial samples (docs/CAPTURE.md, "Samples"): a tensor input
// larger than the per-tensor limit is stored as its leading elements in
// row-major order, as many whole trailing blocks (rows, planes, ...) as fit in
// the limit; the worker (runtime/worker/cases.cpp) fills the whole tensor by
// repeating that block. Written once, here, torch-free, for the capture
// library and the worker. Header-only: the capture's project compiles no
// file of runtime/common.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace forge::sample_part {

// The sampling scheme's name in a sample record ("sampling").
inline constexpr const char* kScheme = "leading";

// The per-tensor limit is this share of the per-process byte cap: at the
// default cap (FORGE_CAPTURE_MAX_BYTES, 1 GiB; forge sets
// capture.max_input_mb_per_model, 256 MB) 64 MiB (16 MB) per tensor.
inline constexpr int64_t kCapShare = 16;

// Bytes of one tensor a sample stores at most, for a per-process cap.
inline int64_t tensor_limit_bytes(int64_t max_bytes) { return std::max<int64_t>(max_bytes / kCapShare, 1); }

// How many leading elements of a tensor with these sizes the capture stores
// when at most `limit_elems` fit: all of them if they fit, else the largest
// number of whole blocks of the innermost dims that fit (a block of the last
// d dims, d as large as fits; at least one element, and more than half the
// limit). `Sizes` is any range of integers (std::vector<int64_t>,
// c10::IntArrayRef).
template <class Sizes>
int64_t stored_numel(const Sizes& sizes, int64_t limit_elems) {
  limit_elems = std::max<int64_t>(limit_elems, 1);
  int64_t numel = 1;
  for (auto s : sizes) numel *= static_cast<int64_t>(s);
  if (numel <= limit_elems) return numel;
  // inner: the product of the trailing sizes that fits; the next size out does not.
  int64_t inner = 1;
  for (auto it = std::rbegin(sizes); it != std::rend(sizes); ++it) {
    const int64_t s = static_cast<int64_t>(*it);
    if (inner * s > limit_elems) break;
    inner *= s;
  }
  return limit_elems / inner * inner;
}

// What a sample's tensor input reads as in a verify record's case list:
// "captured" when the file holds every element, else
// "captured (tiled from N of M elements)".
inline std::string origin(int64_t stored, int64_t numel) {
  if (stored >= numel) return "captured";
  return "captured (tiled from " + std::to_string(stored) + " of " + std::to_string(numel) + " elements)";
}

}  // namespace forge::sample_part
