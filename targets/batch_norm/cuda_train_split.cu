/* batch_norm in training mode, CUDA strategy "train_split": each channel's
 * N * HW values split over S blocks; two passes (statistics, then the affine
 * map), the second merging the first's partials in a fixed order
 * (deterministic).
 *
 * Math, per channel c over its M = N * HW values, in double, shifted by the
 * channel's first value s (so the one-pass variance does not cancel):
 *   S1 = sum(x - s), S2 = sum((x - s)^2)
 *   mean = s + S1 / M;  sq = S2 - S1^2 / M;  var = sq / M
 *   save_mean = mean;  save_invstd = 1 / sqrt(var + eps)
 *   y = fma((x - mean) * invstd, w[c], b[c])  (fp32: the form of the stock
 *   CUDA elementwise pass, ((x - mean) * invstd) * w + b, contracted by nvcc)
 *   running_mean' = momentum * mean + (1 - momentum) * running_mean
 *   running_var'  = momentum * sq / (M - 1) + (1 - momentum) * running_var
 * A channel holding an infinity or NaN gets NaN statistics and outputs, as
 * the stock CUDA kernel's Welford merge gives (inf - inf); under cuDNN's op
 * the mean is the plain sum's (-inf for a -inf row), as cuDNN gives it.
 * Ops: aten::native_batch_norm(input, weight?, bias?, running_mean?,
 *     running_var?, training=True, momentum, eps) -> (out, save_mean,
 *     save_invstd), the new running statistics as outputs 3 and 4
 *     (_common/batch_norm_train_parse.h): 16-bit BatchNorms and instance
 *     norm's reshaped call on CUDA; and aten::cudnn_batch_norm, where a
 *     float32 BatchNorm with weights goes, with the same arguments and an
 *     empty reserve as output 3 (the statistics then 4 and 5).
 * Workspace: 3 * C * S doubles.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * batch_norm_train_parse.h's (training true, NCHW-contiguous input and output
 * of one float dtype, parameters and statistics C contiguous elements); the
 * workspace at least forge_workspace_bytes. A launch failure returns 1.
 *
 * Why it is fast: the stock kernel reduces a channel in one block (a grid of
 * C blocks: 64 channels use 64 of 132 SMs); here S blocks per channel keep
 * every SM busy. x is read twice (statistics, affine map) and y written
 * once, the floor for statistics that precede the output; each block walks
 * its range plane by plane with 16-byte accesses where HW and the base allow.
 * Compiled here (nvcc 13, sm_90a); its GPU runs: docs/STRATEGIES.md.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per block: 128, 256, 512 */
#endif
#ifndef FORGE_P_BLOCKS
#define FORGE_P_BLOCKS 1024 /* blocks over all channels (at least one per channel): 256..4096 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)
#include "../_common/batch_norm_train_args.h"  // the call's fields, shared with the CPU template

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int BLOCKS = FORGE_P_BLOCKS;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32, 64..1024");
static_assert(BLOCKS >= 1 && BLOCKS <= 1 << 20, "FORGE_P_BLOCKS: 1..2^20");
// Each block gets at least this many values of its channel.
constexpr int64_t kMinPerBlock = 4 * BLOCK;

__device__ __forceinline__ double block_sum_d(double v) {
  __shared__ double warps[BLOCK / 32];
  __syncthreads();  // the slots may still be read by the previous call's warp 0
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = v;
  __syncthreads();
  v = 0.0;
  if (warp == 0) {
    v = lane < BLOCK / 32 ? warps[lane] : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  return v;  // thread 0's is the block's sum
}

// parts[0..S) in order, broadcast to the block.
__device__ __forceinline__ double merged(const double* parts, int S) {
  __shared__ double total;
  double v = 0.0;
  for (int s = threadIdx.x; s < S; s += BLOCK) v += parts[s];
  v = block_sum_d(v);
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  return total;
}

// Block (s, c)'s values of channel c: [j0, j1) of its M = N * HW values in
// sample order, a multiple of V each (the host picks V dividing HW), walked
// plane by plane, or (V = 1, planes shorter than the block: 7x7 maps,
// BatchNorm1d's HW = 1) value by value; f(i) for each V-vector at element i.
template <int V, class F>
__device__ __forceinline__ void each_vector(const BnTrainArgs& a, int S, F&& f) {
  const int64_t c = blockIdx.y, M = a.N * a.HW;
  int64_t per = (M + S - 1) / S;
  per += (V - per % V) % V;
  int64_t j = per * blockIdx.x;
  const int64_t j1 = j + per < M ? j + per : M;
  if (V == 1 && a.HW < BLOCK) {  // planes shorter than the block: one value per thread, its plane by division
    for (j += threadIdx.x; j < j1; j += BLOCK) {
      const int64_t n = j / a.HW;
      f((n * a.C + c) * a.HW - n * a.HW + j);
    }
    return;
  }
  while (j < j1) {
    const int64_t n = j / a.HW;
    const int64_t end = (n + 1) * a.HW < j1 ? (n + 1) * a.HW : j1;
    const int64_t base = (n * a.C + c) * a.HW - n * a.HW;  // element of value j is base + j
    for (int64_t t = j + static_cast<int64_t>(threadIdx.x) * V; t < end; t += static_cast<int64_t>(BLOCK) * V)
      f(base + t);
    j = end;
  }
}

// The channel's shift: its first value (sample 0, element 0).
template <class T>
__device__ __forceinline__ double shift_of(const BnTrainArgs& a) {
  return Io<T>::to(static_cast<const T*>(a.x)[blockIdx.y * a.HW]);
}

template <class T, int V>
__global__ void __launch_bounds__(BLOCK) bn_stats(BnTrainArgs a, int S, double* sums, double* squares, double* plain) {
  const T* x = static_cast<const T*>(a.x);
  const double s = shift_of<T>(a);
  double s1 = 0.0, s2 = 0.0, s0 = 0.0;  // s0: the plain sum, for cuDNN's op alone
  each_vector<V>(a, S, [&](int64_t i) {
    float v[V];
    load_n<T, V>(x + i, v);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const double d = v[k] - s;
      s1 += d;
      s2 = fma(d, d, s2);
      if (a.cudnn) s0 += v[k];
    }
  });
  s1 = block_sum_d(s1);
  s2 = block_sum_d(s2);
  if (a.cudnn) s0 = block_sum_d(s0);  // a.cudnn is the same for the whole block
  if (threadIdx.x == 0) {
    sums[blockIdx.y * S + blockIdx.x] = s1;
    squares[blockIdx.y * S + blockIdx.x] = s2;
    if (a.cudnn) plain[blockIdx.y * S + blockIdx.x] = s0;
  }
}

template <class T, class TP, class TS, int V>
__global__ void __launch_bounds__(BLOCK) bn_apply(BnTrainArgs a, int S, const double* sums, const double* squares,
                                                  const double* plain) {
  const int64_t c = blockIdx.y;
  const double M = static_cast<double>(a.N) * a.HW;
  const double s1 = merged(sums + c * S, S), s2 = merged(squares + c * S, S);
  double mean = shift_of<T>(a) + s1 / M, sq = s2 - s1 * s1 / M;
  // A channel holding inf or NaN: native_batch_norm's Welford merge gives a
  // NaN mean (inf - inf), cudnn_batch_norm the plain sum's (-inf for a -inf
  // row); the variance is NaN either way.
  if (!isfinite(s1) || !isfinite(s2)) mean = a.cudnn ? merged(plain + c * S, S) / M : NAN, sq = NAN;
  if (sq < 0) sq = 0;
  const double var = sq / M;
  const double invstd = var != 0 || a.eps != 0 ? 1.0 / sqrt(var + a.eps) : 0.0;  // stock's InvStd: 0 for 0/0
  const float mean_f = static_cast<float>(mean), invstd_f = static_cast<float>(invstd);
  const float w = a.w ? Io<TP>::to(static_cast<const TP*>(a.w)[c]) : 1.0f;
  const float b = a.b ? Io<TP>::to(static_cast<const TP*>(a.b)[c]) : 0.0f;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    static_cast<TS*>(a.save_mean)[c] = Io<TS>::from(mean_f);
    static_cast<TS*>(a.save_invstd)[c] = Io<TS>::from(invstd_f);
    if (a.rm) {
      const double old_m = Io<TP>::to(static_cast<const TP*>(a.rm)[c]);
      const double old_v = Io<TP>::to(static_cast<const TP*>(a.rv)[c]);
      static_cast<TP*>(a.new_rm)[c] = Io<TP>::from(static_cast<float>(a.momentum * mean + (1 - a.momentum) * old_m));
      static_cast<TP*>(a.new_rv)[c] =
          Io<TP>::from(static_cast<float>(a.momentum * (sq / (M - 1)) + (1 - a.momentum) * old_v));
    }
  }
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  each_vector<V>(a, S, [&](int64_t i) {
    float v[V];
    load_n<T, V>(x + i, v);
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = fmaf((v[k] - mean_f) * invstd_f, w, b);
    store_n<T, V>(y + i, v);
  });
}

// Blocks per channel: about BLOCKS over all channels, each with at least
// kMinPerBlock values, at most 65535 (grid.x) and at least 1.
inline int splits_of(const BnTrainArgs& a) {
  const int64_t M = a.N * a.HW;
  int64_t s = (BLOCKS + a.C - 1) / a.C;
  const int64_t by_size = (M + kMinPerBlock - 1) / kMinPerBlock;
  if (s > by_size) s = by_size;
  if (s > 65535) s = 65535;
  return static_cast<int>(s < 1 ? 1 : s);
}

template <class T, class TP, class TS, int V>
int launch_v(const BnTrainArgs& a, int S, double* sums, double* squares, cudaStream_t stream) {
  const dim3 grid(S, static_cast<unsigned>(a.C));
  bn_stats<T, V><<<grid, BLOCK, 0, stream>>>(a, S, sums, squares, squares + a.C * S);
  if (launch_status()) return 1;
  bn_apply<T, TP, TS, V><<<grid, BLOCK, 0, stream>>>(a, S, sums, squares, squares + a.C * S);
  return launch_status();
}

template <class T, class TP, class TS>
int launch(const BnTrainArgs& a, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  const int S = splits_of(a);
  double* sums = static_cast<double*>(workspace);
  if (!sums || workspace_bytes < 3 * a.C * S * static_cast<int64_t>(sizeof(double)) || a.C > 65535) return 1;
  double* squares = sums + a.C * S;
  // 16-byte vectors when every plane starts on one and fills a block's
  // vectors: HW a multiple of the vector, at least BLOCK of them, both bases
  // aligned.
  constexpr int V = 16 / sizeof(T);
  if (a.HW % V == 0 && a.HW >= BLOCK * V && aligned16(a.x) && aligned16(a.y))
    return launch_v<T, TP, TS, V>(a, S, sums, squares, stream);
  return launch_v<T, TP, TS, 1>(a, S, sums, squares, stream);
}

}  // namespace

#include "../_common/batch_norm_train_parse.h"  // the call's checks, shared with the CPU template

extern "C" int64_t forge_workspace_bytes(const forge_call* call) {
  BnTrainArgs a;
  if (parse_batch_norm_train(call, a)) return 0;
  return 3 * a.C * splits_of(a) * static_cast<int64_t>(sizeof(double));
}

extern "C" int forge_kernel(const forge_call* call) {
  BnTrainArgs a;
  if (parse_batch_norm_train(call, a)) return 1;
  cudaStream_t stream = static_cast<cudaStream_t>(call->stream);
  return with_dtype(a.x_dtype, [&](auto t) {
    return with_dtype(a.p_dtype, [&](auto tp) {
      return with_dtype(a.s_dtype, [&](auto ts) {
        return launch<decltype(t), decltype(tp), decltype(ts)>(a, call->workspace, call->workspace_bytes, stream);
      });
    });
  });
}
