// How long forge waits for one evaluation (verification plus benchmark) of a
// candidate before it kills the worker and rejects the candidate ("timeout").
// The worker's own passes over the call's values (the comparisons, the
// float64 accuracy check, the cases' inputs; the memory plan scales with the
// same bytes) grow with the bytes the call moves, so the limit does too: kBaseSeconds plus one second per kBytesPerSecond of the captured
// call's inputs and outputs (Target::bytes), at most kMaxSeconds. An explicit
// limit (`forge try/replay/bisect --timeout S`) replaces it: the user's figure,
// as given. docs/WORKER.md, "Cost". A hanging candidate is still stopped by the
// worker's per-call limit (call_timeout_seconds), whatever this one is.
#pragma once

#include <optional>

namespace forge::eval_timeout {

inline constexpr double kBaseSeconds = 60;        // a small call: setup, ~80 cases, bench.max_seconds
inline constexpr double kBytesPerSecond = 10e6;   // a whole evaluation's passes per byte moved, on a slow host
inline constexpr double kMaxSeconds = 3600;

// The limit for a call moving `io_bytes` (0 or unknown: kBaseSeconds): whole
// seconds, so a call under kBytesPerSecond gets exactly kBaseSeconds.
double scaled(double io_bytes);

// `explicit_seconds` when set, else scaled(io_bytes).
double limit(const std::optional<double>& explicit_seconds, double io_bytes);

}  // namespace forge::eval_timeout
