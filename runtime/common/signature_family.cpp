// The signature-family rule (signature_family.h): the guard's pieces and the
// bound, torch-free.
#include "signature_family.h"

#include <algorithm>

namespace forge::family {

std::string problem(const SignatureFamily& f) {
  for (const auto& v : f.vary)
    if (v.arg < 0) return "vary entry {arg: " + std::to_string(v.arg) + "} names no argument";
  for (const auto& p : f.pins) {
    if (p.arg < 0) return "pins entry {arg: " + std::to_string(p.arg) + "} names no argument";
    if (p.vary < 0 || static_cast<size_t>(p.vary) >= f.vary.size())
      return "pins entry {arg: " + std::to_string(p.arg) + ", vary: " + std::to_string(p.vary) +
             "} names no vary entry (there are " + std::to_string(f.vary.size()) + ")";
  }
  for (int k : f.vary_outputs)
    if (k < 0) return "vary_outputs entry " + std::to_string(k) + " names no output";
  return "";
}

int vary_index(const SignatureFamily& f, int arg, int dim) {
  for (size_t k = 0; k < f.vary.size(); ++k)
    if (f.vary[k].arg == arg && f.vary[k].dim == dim) return static_cast<int>(k);
  return -1;
}

bool shape_matches(const SignatureFamily& f, int arg, std::span<const int64_t> captured,
                   std::span<const int64_t> call, std::vector<int64_t>& extent) {
  if (call.size() != captured.size()) return false;
  for (size_t d = 0; d < call.size(); ++d) {
    const int k = vary_index(f, arg, static_cast<int>(d));
    if (k >= 0 && static_cast<size_t>(k) < extent.size()) extent[static_cast<size_t>(k)] = call[d];
    else if (call[d] != captured[d]) return false;
  }
  return true;
}

bool layout_matches(const SignatureFamily& f, bool call_contiguous, std::span<const int64_t> call_strides,
                    std::span<const int64_t> captured_strides, int64_t storage_offset) {
  if (f.contiguous) return call_contiguous;
  return storage_offset == 0 && std::equal(call_strides.begin(), call_strides.end(), captured_strides.begin(),
                                           captured_strides.end());
}

bool int_matches(const SignatureFamily& f, int arg, int64_t value, int64_t captured,
                 const std::vector<int64_t>& extent) {
  bool pinned = false;
  for (const auto& p : f.pins) {
    if (p.arg != arg) continue;
    pinned = true;
    if (p.vary < 0 || static_cast<size_t>(p.vary) >= extent.size()) return false;
    const int64_t e = extent[static_cast<size_t>(p.vary)];
    if (e < 0 || value != e) return false;
  }
  return pinned || value == captured;
}

bool within_verified(const std::vector<VaryBound>& bounds, const std::vector<int64_t>& extent) {
  if (extent.size() != bounds.size()) return false;
  for (size_t k = 0; k < bounds.size(); ++k)
    if (extent[k] < 1 || extent[k] < bounds[k].lo || extent[k] > bounds[k].hi) return false;
  return true;
}

}  // namespace forge::family
