// The copy ceiling: the fastest a device moves bytes (read + write), measured on
// this machine, so a target's bandwidth floor is bytes / ceiling. The CPU
// backend measures it here (memcpy on every core, best of several rounds); the
// CUDA backend with the user's torch (a large device-to-device copy).
#pragma once

#include <optional>

#include "engine/build.h"

namespace forge {

// Bytes per second, or nullopt when not measured (dry mode before a build, or
// the measurement failed: then the build reports no floors).
std::optional<double> copy_ceiling(BuildContext& ctx);

// The measurement itself: `bytes` per buffer, `threads` copying in parallel.
double measure_memcpy_ceiling(size_t bytes, unsigned threads, int rounds);

}  // namespace forge
