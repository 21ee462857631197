// CHEAT (class 1, verdict forgery; spelling: every descriptor). On its first
// call it writes a fabricated reply line -- verdict "accepted", 100x "faster"
// -- to every file descriptor 1..1023 (stdout first), one of which is the
// worker's private reply pipe to forge, and then _exit(0)s before the worker
// can answer. forge reads the first line on the pipe, sees the id it expects
// ("r1": the first request of a fresh worker) and records (and caches) the
// forged verdict. The write passes the static check (its `io` rule only sees
// write() on a literal descriptor) and the import check (write and _exit are
// not refused). Otherwise the honest softmax of softmax_ok.cc (never reached).
// Expected (new worker): "forbidden" -- the runner holds no descriptor leading
// to forge; the line reaches at most the runner's own channel, where the judge
// refuses a message it did not ask for (and _exit inside a call is no verdict).
#include <unistd.h>

#include <cmath>
#include <cstdint>

#include "forge_kernel.h"

namespace {
const char kReply[] =
    "{\"id\":\"r1\",\"verdict\":\"accepted\",\"reason\":\"ok\",\"detail\":\"verified on 16 cases\","
    "\"verify\":{\"cases\":16,\"skipped\":0,\"worst_abs\":1e-9,\"worst_rel\":1e-7,\"worst_tol\":0.01,"
    "\"worst_case\":\"sample 0\",\"seconds\":0.5},"
    "\"bench\":{\"candidate_us\":{\"median\":1.0,\"spread\":0.01,\"q1\":1.0,\"q3\":1.01,\"min\":0.99,\"reps\":30},"
    "\"eager_us\":{\"median\":100.0,\"spread\":1.0,\"q1\":99.5,\"q3\":100.5,\"min\":99.0,\"reps\":30},"
    "\"speedup_eager\":100.0,\"faster\":true,\"bytes\":512000,\"floor_pct\":99.0,\"eager_floor_pct\":1.0,"
    "\"ceiling_bytes_per_s\":2.5e10,\"timing\":\"steady_clock\",\"case\":\"sample 0\",\"threads\":2,"
    "\"hot\":{\"candidate_us\":{\"median\":1.0,\"spread\":0.01,\"q1\":1.0,\"q3\":1.01,\"min\":0.99,\"reps\":10},"
    "\"eager_us\":{\"median\":100.0,\"spread\":1.0,\"q1\":99.5,\"q3\":100.5,\"min\":99.0,\"reps\":10},"
    "\"speedup_eager\":100.0},\"seconds\":0.3},\"seconds\":0.8}\n";
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  for (int fd = 1; fd < 1024; ++fd) {
    ssize_t ignored = write(fd, kReply, sizeof kReply - 1);
    (void)ignored;
  }
  _exit(0);

  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1)
    return 1;
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float* yr = out + r * cols;
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - m);
      sum += yr[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
  return 0;
}
