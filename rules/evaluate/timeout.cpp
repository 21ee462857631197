#include "rules/evaluate/timeout.h"

#include <algorithm>
#include <cmath>

namespace forge::eval_timeout {

double scaled(double io_bytes) {
  if (!(io_bytes > 0)) return kBaseSeconds;  // also NaN
  return std::min(kMaxSeconds, kBaseSeconds + std::floor(io_bytes / kBytesPerSecond));
}

double limit(const std::optional<double>& explicit_seconds, double io_bytes) {
  return explicit_seconds ? *explicit_seconds : scaled(io_bytes);
}

}  // namespace forge::eval_timeout
