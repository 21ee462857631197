/* group_norm, CUDA strategy "ticket_group": one read and one write of x for
 * slices of any size, in one launch, without clusters. Each (sample, group)
 * slice is cut into chunks of BLOCK * PER_THREAD elements, one block per
 * chunk. A block keeps its chunk in registers, writes the chunk's partial
 * moments to the workspace, waits until every chunk of its group has done the
 * same, merges the group's partials (fixed order: deterministic) and
 * normalizes its chunk from the registers.
 *
 * Waiting for other blocks needs them to run. Blocks take their (group,
 * chunk) in the order they start (an atomic ticket), so the chunks of the
 * oldest unfinished group are held by running blocks or by the next ones to
 * start: while this kernel has the GPU and a group's chunks fit on it at once
 * (checked with the occupancy API, else nonzero: the package falls back), no
 * wait can deadlock. Other work on the GPU (another stream, another call of
 * this kernel) can still hold the slots a group needs. So a block that waits
 * too long while some of its group's tickets are not taken yet stops waiting
 * and computes the missing partial moments itself, from x, with the same code
 * and thread mapping, so with the same bits: a slowdown, never a hang or a
 * wrong result.
 *
 * Math as split_group: chunk k (n_k elements), fp32, K = its first element,
 * S1 = sum (x - K), S2 = sum (x - K)^2; mean_k = K + S1/n_k,
 * M2_k = S2 - S1^2/n_k; merged with Chan's formula; var = M2/|s|;
 * rstd = rsqrt(var + eps); y = fma(x, rstd * w[c], fma(-rstd * w[c], mean, b[c])).
 * Op: aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias,
 *     SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (out, mean, rstd).
 * Workspace: N*G*SPLIT*3 floats of partial moments, then N*G + 1 ints
 * (the ticket, and each group's arrivals), zeroed by a small kernel first.
 * In-slice indices are 32-bit (slices up to 2^31 elements; else nonzero).
 *
 * Why: split_group reads x twice (1.5x the floor's bytes); cluster_group keeps
 * a slice on chip but, one 224 KB CTA per SM, idles HBM at every cluster
 * barrier (docs/PERF.md, run E). Here many blocks per SM at different phases
 * (loading, waiting, writing) keep reads and writes in flight together.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 512 /* threads per chunk: 512, 256, 1024 */
#endif
#ifndef FORGE_P_PER_THREAD
#define FORGE_P_PER_THREAD 32 /* elements each thread keeps in registers: 32, 16, 64 (a multiple of 8) */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int PER_THREAD = FORGE_P_PER_THREAD;
constexpr int64_t CHUNK = static_cast<int64_t>(BLOCK) * PER_THREAD;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(PER_THREAD % 8 == 0 && PER_THREAD >= 8 && PER_THREAD <= 128, "FORGE_P_PER_THREAD: a multiple of 8 in 8..128");
// Polls (each a global load and a __nanosleep of up to ~200 ns) before a
// block whose group still has untaken tickets computes them itself.
constexpr int64_t SPIN_LIMIT = int64_t(1) << 20;
// Blocks per SM the registers must allow: two or more, so that blocks at
// different phases (loading, waiting, writing) share each SM.
constexpr int MIN_BLOCKS = BLOCK >= 1024 ? 1 : 1024 / BLOCK;

struct GnArgs {
  const void* x;
  const void* w;
  const void* b;
  void* y;
  void* mean;
  void* rstd;
  int64_t N, C, HW, G;
  float eps;
  void* workspace;
};

#include "../_common/group_norm_moments.cuh"  // partial moments and their merge: inlined when forge loads the template

__global__ void gn_reset(int* __restrict__ counters, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    counters[i] = 0;
}

// Chunk [j0, j1) of a slice into `raw`: item i of thread t covers elements
// j0 + (i * BLOCK + t) * VW + [0, VW), so consecutive threads read
// consecutive 16-byte vectors; the chunk stays in its storage type (half the
// registers of fp32 for 16-bit x).
template <class T, int VW, bool VEC, int ITEMS>
__device__ __forceinline__ void load_chunk(const T* xs, int j0, int j1, Pack<T, VW> (&raw)[ITEMS]) {
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int j = j0 + (i * BLOCK + static_cast<int>(threadIdx.x)) * VW;
    if (VEC) {
      if (j < j1) raw[i] = *reinterpret_cast<const Pack<T, VW>*>(xs + j);  // n_el % VW == 0
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e) raw[i].v[e] = j + e < j1 ? xs[j + e] : Io<T>::from(0.0f);
    }
  }
}

// The chunk's partial moments (count, mean, M2), shifted by its first
// element K; every thread gets them. Rounding is pinned (__fadd_rn,
// __fmaf_rn) so that a block recomputing another's chunk gets its bits.
template <class T, int VW, int ITEMS>
__device__ __forceinline__ void chunk_moments(const Pack<T, VW> (&raw)[ITEMS], int j0, int j1, float K,
                                              float* scratch, float out[3]) {
  float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int j = j0 + (i * BLOCK + static_cast<int>(threadIdx.x)) * VW;
#pragma unroll
    for (int e = 0; e < VW; ++e)
      if (j + e < j1) {
        const float d = __fsub_rn(Io<T>::to(raw[i].v[e]), K);
        s1 = __fadd_rn(s1, d);
        s2 = __fmaf_rn(d, d, s2);
      }
  }
  s1 = block_sum(s1, scratch);
  s2 = block_sum(s2, scratch);
  const float cnt = static_cast<float>(j1 - j0);
  out[0] = cnt;
  out[1] = K + s1 / cnt;
  out[2] = s2 - s1 * s1 / cnt;
}

// counters[0]: the next ticket; counters[1 + ng]: chunks of group ng that
// have written their partial moments.
template <class T, class TW, class TS, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS)
    gn_ticket(const T* __restrict__ x, const TW* __restrict__ w, const TW* __restrict__ b, T* __restrict__ y,
              TS* __restrict__ mean_out, TS* __restrict__ rstd_out, float* __restrict__ ws, int* __restrict__ counters,
              int split, int64_t C, int HW, int64_t G, float eps) {
  constexpr int ITEMS = PER_THREAD / VW;
  __shared__ float scratch[32];
  __shared__ int ticket;
  __shared__ float stats[2];
  __shared__ int gave_up;
  if (threadIdx.x == 0) {
    ticket = atomicAdd(&counters[0], 1);
    gave_up = 0;
  }
  __syncthreads();
  const int64_t D = C / G;
  const int n_el = static_cast<int>(D * HW);
  const int64_t ng = ticket / split;
  const int k = ticket % split;
  const int64_t n = ng / G, g = ng % G;
  const int j0 = k * static_cast<int>(CHUNK), j1 = j0 + static_cast<int>(CHUNK) < n_el ? j0 + static_cast<int>(CHUNK) : n_el;
  const int64_t off = (n * C + g * D) * HW;
  const T* xs = x + off;

  Pack<T, VW> raw[ITEMS];
  load_chunk<T, VW, VEC>(xs, j0, j1, raw);
  float part[3];
  chunk_moments<T, VW>(raw, j0, j1, Io<T>::to(xs[j0]), scratch, part);
  float* slots = ws + ng * split * 3;
  if (threadIdx.x == 0) {
    slots[k * 3] = part[0];
    slots[k * 3 + 1] = part[1];
    slots[k * 3 + 2] = part[2];
    __threadfence();  // the slot is visible before the arrival is counted
    int arrived = atomicAdd(&counters[1 + ng], 1) + 1;
    volatile int* arrivals = &counters[1 + ng];
    volatile int* next_ticket = &counters[0];
    int64_t spins = 0;
    while (arrived < split) {
      // Only while some of the group's tickets are untaken can the wait be
      // for slots held by other work; once all are taken, their blocks run.
      if (*next_ticket < (ng + 1) * split && ++spins >= SPIN_LIMIT) {
        gave_up = 1;
        break;
      }
      __nanosleep(100);
      arrived = *arrivals;
    }
    __threadfence();
  }
  __syncthreads();
  if (gave_up) {
    // Compute every partial of the group here (the same bits the owners
    // write: writing them again is harmless), then this block's own chunk again.
    for (int p = 0; p < split; ++p) {
      const int p0 = p * static_cast<int>(CHUNK), p1 = p0 + static_cast<int>(CHUNK) < n_el ? p0 + static_cast<int>(CHUNK) : n_el;
      load_chunk<T, VW, VEC>(xs, p0, p1, raw);
      chunk_moments<T, VW>(raw, p0, p1, Io<T>::to(xs[p0]), scratch, part);
      if (threadIdx.x == 0) {
        slots[p * 3] = part[0];
        slots[p * 3 + 1] = part[1];
        slots[p * 3 + 2] = part[2];
      }
    }
    __threadfence();
    __syncthreads();
    load_chunk<T, VW, VEC>(xs, j0, j1, raw);
  }

  // Merge the group's partials as split_group does: lane l takes partials
  // l, l+32, ... in order, then a fixed shuffle tree (the same bits in every
  // block of the group). Other blocks wrote them: read through L2 (__ldcg).
  if (threadIdx.x < 32) {
    Moments m{0.0f, 0.0f, 0.0f};
    for (int p = threadIdx.x; p < split; p += 32)
      m = merge(m, Moments{__ldcg(slots + p * 3), __ldcg(slots + p * 3 + 1), __ldcg(slots + p * 3 + 2)});
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      Moments other{__shfl_down_sync(0xffffffffu, m.n, o), __shfl_down_sync(0xffffffffu, m.mean, o),
                    __shfl_down_sync(0xffffffffu, m.m2, o)};
      if ((threadIdx.x & (2 * o - 1)) == 0) m = merge(m, other);
    }
    if (threadIdx.x == 0) {
      const float var = m.m2 / static_cast<float>(n_el);
      // mean/rstd as stored in the outputs' dtype, as the stock CUDA kernel
      // normalizes with (split_group says why).
      stats[0] = Io<TS>::to(Io<TS>::from(m.mean));
      stats[1] = Io<TS>::to(Io<TS>::from(rsqrtf(var + eps)));
      if (k == 0) {
        mean_out[ng] = Io<TS>::from(stats[0]);
        rstd_out[ng] = Io<TS>::from(stats[1]);
      }
    }
  }
  __syncthreads();
  const float mean = stats[0], rstd = stats[1];
  const int64_t c0 = g * D;
  T* ys = y + off;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int j = j0 + (i * BLOCK + static_cast<int>(threadIdx.x)) * VW;
    if (VEC) {
      if (j < j1) {  // HW % VW == 0: the vector lies in one channel
        const int64_t c = c0 + j / HW;
        const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
        const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
        Pack<T, VW> out;
#pragma unroll
        for (int e = 0; e < VW; ++e) out.v[e] = Io<T>::from(fmaf(Io<T>::to(raw[i].v[e]), scale, bias));
        *reinterpret_cast<Pack<T, VW>*>(ys + j) = out;
      }
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e) {
        if (j + e >= j1) break;
        const int64_t c = c0 + (j + e) / HW;
        const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
        const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
        ys[j + e] = Io<T>::from(fmaf(Io<T>::to(raw[i].v[e]), scale, bias));
      }
    }
  }
}

inline int64_t split_of(const GnArgs& a) {
  const int64_t n_el = a.C / a.G * a.HW;
  return (n_el + CHUNK - 1) / CHUNK;
}
inline int64_t moments_bytes(const GnArgs& a) {
  return a.N * a.G * split_of(a) * 3 * static_cast<int64_t>(sizeof(float));
}
inline int64_t workspace_needed(const GnArgs& a) {
  return moments_bytes(a) + (a.N * a.G + 1) * static_cast<int64_t>(sizeof(int));
}

// Blocks of `kernel` that can run at once on this device: a group's chunks
// must fit (see the top of the file).
template <class K>
int64_t resident_blocks(K kernel) {
  int dev = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, BLOCK, 0) != cudaSuccess) return 0;
  return static_cast<int64_t>(sms) * per_sm;
}

template <class T, class TW, class TS>
int launch(const GnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  static_assert(PER_THREAD % VW == 0, "PER_THREAD: a multiple of the vector width");
  const int64_t groups = a.N * a.G, split = split_of(a);
  const int64_t tickets = groups * split;
  if (tickets > 0x7fffffffLL || a.C / a.G * a.HW > 0x7fffffffLL || a.HW > 0x7fffffffLL) return 1;
  const bool vec = aligned16(a.x) && aligned16(a.y) && a.HW % VW == 0;
  float* ws = static_cast<float*>(a.workspace);
  int* counters = reinterpret_cast<int*>(static_cast<char*>(a.workspace) + moments_bytes(a));
  auto run = [&](auto kernel) {
    if (resident_blocks(kernel) < split) return 1;  // a group would not fit at once
    const int64_t reset_blocks = (groups + 1 + 255) / 256;
    gn_reset<<<static_cast<unsigned>(reset_blocks < 1024 ? reset_blocks : 1024), 256, 0, stream>>>(counters, groups + 1);
    if (launch_status()) return 1;
    kernel<<<static_cast<unsigned>(tickets), BLOCK, 0, stream>>>(
        static_cast<const T*>(a.x), static_cast<const TW*>(a.w), static_cast<const TW*>(a.b),
        static_cast<T*>(a.y), static_cast<TS*>(a.mean), static_cast<TS*>(a.rstd), ws, counters,
        static_cast<int>(split), a.C, static_cast<int>(a.HW), a.G, a.eps);
    return launch_status();
  };
  return vec ? run(gn_ticket<T, TW, TS, VW, true>) : run(gn_ticket<T, TW, TS, VW, false>);
}

#include "../_common/group_norm_cuda_parse.cuh"  // dtype dispatch and argument checks: inlined when forge loads the template
#include "../_common/group_norm_cuda_entry.cuh"  // the entry points: inlined when forge loads the template
