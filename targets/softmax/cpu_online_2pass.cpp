/* softmax, CPU strategy "online_2pass": one read computes max and sum together
 * (online softmax), a second read writes the result.
 *
 * Math: for every row r of the last dim (length L), with running per-lane
 * (m, s): for each chunk of FORGE_P_CHUNK vectors c,
 *   m' = max(m, max(c));  s = s * exp(m - m') + sum exp(c - m');  m = m'
 * then the lanes are merged (M = max m_l, S = sum s_l * exp(m_l - M)) and
 *   y[r,j] = exp(x[r,j] - M) * (1/S),
 * all in fp32 whatever the storage dtype (float32, bfloat16, float16).
 * Op: aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor.
 * Shapes: any rank >= 1, dim == the last dim, any row count and row length.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * one input and one output of dtype float32/bfloat16/float16 with equal sizes,
 * both contiguous, dim wrapping to the last dim.
 * Non-finite values follow the stock CPU kernel: an all -inf row gives NaN, a
 * +inf or NaN makes the row NaN. The online update is guarded so that a lane
 * that has only seen -inf (a masked row: every other element -inf) keeps
 * s = 0 instead of NaN from (-inf) - (-inf).
 *
 * Why it is fast: the input is read twice and the output written once (the
 * three-pass strategy also re-reads and re-writes the output): it pays off
 * when a row does not fit in L2; exp runs (1 + 1/CHUNK) times per element in
 * the first pass, once in the second. Vector exp and loads as in rows_3pass (one ISA register per vector, FORGE_P_ISA).
 * Single-threaded (the worker refuses OpenMP runtimes).
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "forge_kernel.h"

#pragma GCC diagnostic ignored "-Wpsabi" /* vectors wider than the target ISA are fine: all inline */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized" /* GCC 12 false positives inside the fp16 */
#pragma GCC diagnostic ignored "-Wuninitialized"      /* conversion intrinsics (_mm512_cvt*ph*) */

#ifndef FORGE_P_ISA
#define FORGE_P_ISA 0 /* 0: as compiled (-march); 2: AVX2 paths; 3: AVX-512 paths (run-time checked) */
#endif
#ifndef FORGE_P_CHUNK
#define FORGE_P_CHUNK 4 /* vectors per rescale of the running sum: 1, 2, 4, 8 */
#endif

#include "../_common/cpu_common.h"  // inlined when forge loads the template (docs/STRATEGIES.md)

constexpr int K = FORGE_P_CHUNK;
static_assert(K >= 1 && K <= 16, "FORGE_P_CHUNK must be 1..16");

// One chunk of k vectors folded into the running (m, s).
inline void online_update(vf& m, vf& s, const vf* c, int k) {
  vf cm = c[0];
  for (int j = 1; j < k; ++j) cm = vmax(cm, c[j]);
  vf mn = vmax(m, cm);
  vi dead = mn == splat(-INFINITY);  // this lane has seen only -inf so far
  vf scale = vexp(m - mn);
  vf add = splat(0.0f);
  for (int j = 0; j < k; ++j) add += vexp(c[j] - mn);
  s = dead ? s : s * scale + add;
  m = mn;
}

template <class TI, class TO>
void softmax_row(const TI* x, TO* y, int64_t L) {
  const TI ninf = neg_inf<TI>();
  vf m = splat(-INFINITY), s = splat(0.0f);
  vf c[K];
  int64_t i = 0;
  for (; i + K * W <= L; i += K * W) {
    for (int j = 0; j < K; ++j) c[j] = load(x + i + j * W);
    online_update(m, s, c, K);
  }
  int k = 0;
  for (; i + W <= L; i += W) c[k++] = load(x + i);
  if (i < L) c[k++] = load_part(x + i, L - i, ninf);
  if (k) online_update(m, s, c, k);
  // Merge the lanes.
  float M = hmax(m);
  float S = 0.0f;
  for (int l = 0; l < W; ++l)
    if (m[l] != -INFINITY) S += s[l] * expf(m[l] - M);
    else S += s[l];  // 0, or NaN when a NaN was seen
  // An all -inf row: the stock kernel gives NaN.
  const float inv = M == -INFINITY ? NAN : 1.0f / S;
  const vf Mv = splat(M), iv = splat(inv);
  i = 0;
  for (; i + W <= L; i += W) store(y + i, vexp(load(x + i) - Mv) * iv);
  if (i < L) store_part(y + i, vexp(load_part(x + i, L - i, ninf) - Mv) * iv, L - i);
}

template <class TI, class TO>
__attribute__((noinline)) void softmax_rows(const void* x, void* y, int64_t rows, int64_t L) {
  const TI* xi = static_cast<const TI*>(x);
  TO* yo = static_cast<TO*>(y);
  for (int64_t r = 0; r < rows; ++r) softmax_row(xi + r * L, yo + r * L, L);
}

template <class TI>
int dispatch_out(int32_t out_dtype, const void* x, void* y, int64_t rows, int64_t L) {
  switch (out_dtype) {
    case FORGE_FLOAT32: softmax_rows<TI, float>(x, y, rows, L); return 0;
    case FORGE_BFLOAT16: softmax_rows<TI, bf16>(x, y, rows, L); return 0;
    case FORGE_FLOAT16: softmax_rows<TI, f16>(x, y, rows, L); return 0;
    default: return 1;
  }
}

__attribute__((noinline)) int softmax_dispatch(int32_t in_dtype, int32_t out_dtype, const void* x, void* y,
                                               int64_t rows, int64_t L) {
  switch (in_dtype) {
    case FORGE_FLOAT32: return dispatch_out<float>(out_dtype, x, y, rows, L);
    case FORGE_BFLOAT16: return dispatch_out<bf16>(out_dtype, x, y, rows, L);
    case FORGE_FLOAT16: return dispatch_out<f16>(out_dtype, x, y, rows, L);
    default: return 1;
  }
}

}  // namespace

#if FORGE_P_ISA != 0
#pragma GCC pop_options
#endif

namespace {
// The ISA the compute code was compiled for is present on this CPU.
bool cpu_ok() {
#if FORGE_P_ISA == 3
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#elif FORGE_P_ISA == 2
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return true;
#endif
}

bool is_contiguous(const forge_tensor& t) {
  int64_t expect = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.sizes[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.sizes[d];
  }
  return true;
}
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  if (!call || call->n_inputs != 1 || call->n_outputs != 1 || call->n_scalars < 2) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& y = call->outputs[0];
  if (!x.data || !y.data || x.ndim < 1 || x.ndim != y.ndim) return 1;
  if (call->scalars[0].kind != FORGE_ARG_INT) return 1;
  int64_t dim = call->scalars[0].i;
  if (dim < 0) dim += x.ndim;
  if (dim != x.ndim - 1) return 1;
  int64_t numel = 1;
  for (int d = 0; d < x.ndim; ++d) {
    if (x.sizes[d] != y.sizes[d]) return 1;
    numel *= x.sizes[d];
  }
  if (!is_contiguous(x) || !is_contiguous(y)) return 1;
  if (!cpu_ok()) return 1;
  if (numel == 0) return 0;
  const int64_t L = x.sizes[x.ndim - 1];
  return softmax_dispatch(x.dtype, y.dtype, x.data, y.data, numel / L, L);
}
