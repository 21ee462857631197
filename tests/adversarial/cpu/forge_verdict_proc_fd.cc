// CHEAT (class 1, verdict forgery; spelling: /proc/self/fd). Lists
// /proc/self/fd (opendir spelled through a token-pasting macro, so the static
// check's `io` rule does not see it; opendir/readdir are not refused by the
// import check), writes a fabricated "accepted, 100x faster" reply line for
// request "r1" to every descriptor that is a pipe -- the worker's private
// reply pipe to forge among them -- and _exit(0)s. forge takes the first line
// on the pipe as the verdict. Otherwise the honest softmax of softmax_ok.cc.
// Expected (new worker): "forbidden" -- opendir is an openat, which the
// runner's seccomp filter refuses (and the runner holds no pipe to forge).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "forge_kernel.h"

#define LIST_OF(kind) open##kind

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

void forge_the_verdict() {
  DIR* d = LIST_OF(dir)("/proc/self/fd");
  if (!d) return;
  const int own = dirfd(d);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    struct stat st;
    if (fd == own || fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) continue;
    ssize_t ignored = write(fd, kReply, sizeof kReply - 1);
    (void)ignored;
  }
  _exit(0);
}
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  forge_the_verdict();

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
