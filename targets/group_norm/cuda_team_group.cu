/* group_norm, CUDA strategy "team_group": one read and one write of x for
 * slices of any size, in one launch, without clusters. A persistent grid is
 * cut into teams of SPLIT blocks, SPLIT = the chunks a (sample, group) slice
 * has; a team takes the slices team, team + teams, ... in turn, block k of the
 * team always chunk k. Each block copies its chunk of the team's next slice
 * into one of two shared-memory buffers (cp.async: no registers, the loads
 * stay in flight) while it finishes the current slice from the other: waits
 * until every block of the team has published its chunk's partial moments,
 * merges them in fixed order, normalizes and writes. Then it publishes the
 * next chunk's moments.
 *
 * Why teams: a block waits only for its own team, so teams drift apart and
 * their loads, waits and writes overlap on the GPU (blocks that took chunks
 * from a shared ticket counter waited on ever-changing partners and moved in
 * a GPU-wide convoy: 28% of the floor, run G). Why shared memory: each sync
 * round must move enough bytes to cover its latency (~5-10 us of fences,
 * atomics and polls), so chunks are tens of KB a block, double-buffered.
 *
 * Deadlock-free while the grid is co-resident (the occupancy API sizes it):
 * every block of a team publishes slice i before it waits on slice i. Other
 * work on the GPU can still hold the slots a team needs, so a block that waits
 * ~2^20 polls computes the team's partial moments itself, from x, with the
 * same code and thread mapping, so with the same bits: slower, never a hang
 * or a wrong result.
 *
 * Math as split_group: chunk k (n_k elements), fp32, K = its first element,
 * S1 = sum (x - K), S2 = sum (x - K)^2; mean_k = K + S1/n_k,
 * M2_k = S2 - S1^2/n_k; merged with Chan's formula; var = M2/|s|;
 * rstd = rsqrt(var + eps); y = fma(x, rstd * w[c], fma(-rstd * w[c], mean, b[c])).
 * Op: aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias,
 *     SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (out, mean, rstd).
 * Workspace: N*G*SPLIT*3 floats of partial moments, then N*G ints (each
 * slice's arrivals), zeroed by a small kernel first.
 * In-slice indices are 32-bit (slices up to 2^31 elements; else nonzero).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 512 /* threads per block: 512, 1024 */
#endif
#ifndef FORGE_P_CHUNK_KB
#define FORGE_P_CHUNK_KB 64 /* bytes of x per chunk, in KB (two buffers a block): 64, 96, 32 */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int CHUNK_BYTES = FORGE_P_CHUNK_KB * 1024;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(CHUNK_BYTES % (16 * BLOCK) == 0 && CHUNK_BYTES <= 100 * 1024,
              "FORGE_P_CHUNK_KB: whole 16-byte vectors for every thread, two buffers within 227 KB");
// Polls (each a global load and a __nanosleep of up to ~200 ns) before a
// block computes its team's partial moments itself.
constexpr int64_t SPIN_LIMIT = int64_t(1) << 20;

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

// Elements of T in a chunk, and 16-byte vectors per thread.
template <class T>
__host__ __device__ constexpr int chunk_elems() {
  return CHUNK_BYTES / static_cast<int>(sizeof(T));
}
constexpr int ITEMS = CHUNK_BYTES / 16 / BLOCK;

struct Ticket {
  int64_t ng;   // (sample, group)
  int k;        // chunk within it
  int j0, j1;   // its elements [j0, j1) within the slice
  int64_t off;  // the slice's first element in x and y
};

template <class T>
__device__ __forceinline__ Ticket chunk_of(int64_t ng, int k, int64_t C, int HW, int64_t G) {
  const int64_t D = C / G;
  const int n_el = static_cast<int>(D * HW);
  Ticket r;
  r.ng = ng;
  r.k = k;
  r.j0 = k * chunk_elems<T>();
  r.j1 = r.j0 + chunk_elems<T>() < n_el ? r.j0 + chunk_elems<T>() : n_el;
  r.off = (ng / G * C + ng % G * D) * HW;
  return r;
}

// Chunk [j0, j1) of a slice into `buf`: vector i of thread t holds elements
// j0 + (i * BLOCK + t) * VW + [0, VW), so consecutive threads copy consecutive
// 16 bytes. Each thread later reads only what it copied, so waiting for its
// own copies (wait_copies) is enough: no block barrier.
template <class T, int VW, bool VEC>
__device__ __forceinline__ void stage_chunk(const T* xs, int j0, int j1, Pack<T, VW>* buf) {
  if constexpr (VEC) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int v = i * BLOCK + static_cast<int>(threadIdx.x);
      const int j = j0 + v * VW;
      if (j < j1) __pipeline_memcpy_async(&buf[v], xs + j, sizeof(Pack<T, VW>));  // n_el % VW == 0
    }
  } else {  // unaligned or HW % VW != 0: element loads, not unrolled (registers)
#pragma unroll 1
    for (int i = 0; i < ITEMS; ++i) {
      const int v = i * BLOCK + static_cast<int>(threadIdx.x);
      const int j = j0 + v * VW;
      Pack<T, VW> p;
#pragma unroll
      for (int e = 0; e < VW; ++e) p.v[e] = j + e < j1 ? xs[j + e] : Io<T>::from(0.0f);
      buf[v] = p;
    }
  }
  __pipeline_commit();
}
__device__ __forceinline__ void wait_copies() { __pipeline_wait_prior(0); }

// The chunk's partial moments (count, mean, M2), shifted by its first
// element K; every thread gets them. Rounding is pinned (__fadd_rn,
// __fmaf_rn) so that a block recomputing another's chunk gets its bits.
template <class T, int VW>
__device__ __forceinline__ void chunk_moments(const Pack<T, VW>* buf, int j0, int j1, float K, float* scratch,
                                              float out[3]) {
  float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int v = i * BLOCK + static_cast<int>(threadIdx.x);
    const int j = j0 + v * VW;
    if (j >= j1) continue;
    const Pack<T, VW> p = buf[v];
#pragma unroll
    for (int e = 0; e < VW; ++e)
      if (j + e < j1) {
        const float d = __fsub_rn(Io<T>::to(p.v[e]), K);
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

// Writes the staged chunk's partial moments to its slot and counts its arrival.
template <class T, int VW>
__device__ __forceinline__ void publish(const Ticket& t, const T* x, const Pack<T, VW>* buf, int split, float* ws,
                                        int* counters, float* scratch) {
  wait_copies();
  float part[3];
  chunk_moments<T, VW>(buf, t.j0, t.j1, Io<T>::to(x[t.off + t.j0]), scratch, part);
  if (threadIdx.x == 0) {
    float* slot = ws + (t.ng * split + t.k) * 3;
    slot[0] = part[0];
    slot[1] = part[1];
    slot[2] = part[2];
    __threadfence();  // the slot is visible before the arrival is counted
    atomicAdd(&counters[t.ng], 1);
  }
}

// Waits until every chunk of t's group has published, merges the group's
// partials, and writes the normalized chunk from `buf`.
template <class T, class TW, class TS, int VW, bool VEC>
__device__ __forceinline__ void finish(const Ticket& t, const T* __restrict__ x, const TW* __restrict__ w,
                                       const TW* __restrict__ b, T* __restrict__ y, TS* __restrict__ mean_out,
                                       TS* __restrict__ rstd_out, float* ws, int* counters, int split, int64_t C,
                                       int HW, int64_t G, float eps, Pack<T, VW>* buf, float* scratch, float* stats,
                                       int* gave_up) {
  const int n_el = static_cast<int>(C / G * HW);
  const T* xs = x + t.off;
  float* slots = ws + t.ng * split * 3;
  if (threadIdx.x == 0) {
    *gave_up = 0;
    volatile int* arrivals = &counters[t.ng];
    int64_t spins = 0;
    while (*arrivals < split) {
      if (++spins >= SPIN_LIMIT) {  // a team member is not running (see the top)
        *gave_up = 1;
        break;
      }
      __nanosleep(100);
    }
    __threadfence();
  }
  __syncthreads();
  if (*gave_up) {
    // Compute every partial of the group here through `buf` (the same bits
    // the owners write: writing them again is harmless), then restage this
    // block's chunk.
    float part[3];
    for (int p = 0; p < split; ++p) {
      const int p0 = p * chunk_elems<T>(), p1 = p0 + chunk_elems<T>() < n_el ? p0 + chunk_elems<T>() : n_el;
      stage_chunk<T, VW, VEC>(xs, p0, p1, buf);
      wait_copies();
      chunk_moments<T, VW>(buf, p0, p1, Io<T>::to(xs[p0]), scratch, part);
      if (threadIdx.x == 0) {
        slots[p * 3] = part[0];
        slots[p * 3 + 1] = part[1];
        slots[p * 3 + 2] = part[2];
      }
    }
    __threadfence();
    __syncthreads();
    stage_chunk<T, VW, VEC>(xs, t.j0, t.j1, buf);
    wait_copies();
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
      if (t.k == 0) {
        mean_out[t.ng] = Io<TS>::from(stats[0]);
        rstd_out[t.ng] = Io<TS>::from(stats[1]);
      }
    }
  }
  __syncthreads();
  const float mean = stats[0], rstd = stats[1];
  const int64_t c0 = t.ng % G * (C / G);
  T* ys = y + t.off;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int v = i * BLOCK + static_cast<int>(threadIdx.x);
    const int j = t.j0 + v * VW;
    if (j >= t.j1) continue;
    const Pack<T, VW> p = buf[v];
    if (VEC) {  // HW % VW == 0: the vector lies in one channel
      const int64_t c = c0 + j / HW;
      const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
      const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
      Pack<T, VW> out;
#pragma unroll
      for (int e = 0; e < VW; ++e) out.v[e] = Io<T>::from(fmaf(Io<T>::to(p.v[e]), scale, bias));
      *reinterpret_cast<Pack<T, VW>*>(ys + j) = out;
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e) {
        if (j + e >= t.j1) break;
        const int64_t c = c0 + (j + e) / HW;
        const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
        const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
        ys[j + e] = Io<T>::from(fmaf(Io<T>::to(p.v[e]), scale, bias));
      }
    }
  }
}

// counters[ng]: chunks of slice ng that have published their partial
// moments. Two chunk buffers in dynamic shared memory; the block alternates.
template <class T, class TW, class TS, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK)
    gn_team(const T* __restrict__ x, const TW* __restrict__ w, const TW* __restrict__ b, T* __restrict__ y,
            TS* __restrict__ mean_out, TS* __restrict__ rstd_out, float* __restrict__ ws, int* __restrict__ counters,
            int split, int teams, int64_t slices, int64_t C, int HW, int64_t G, float eps) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Pack<T, VW>* bufs[2] = {reinterpret_cast<Pack<T, VW>*>(smem_raw),
                          reinterpret_cast<Pack<T, VW>*>(smem_raw + CHUNK_BYTES)};
  __shared__ float scratch[32];
  __shared__ float stats[2];
  __shared__ int gave_up;
  const int team = static_cast<int>(blockIdx.x) / split, k = static_cast<int>(blockIdx.x) % split;
  if (team >= teams || team >= slices) return;
  Ticket cur = chunk_of<T>(team, k, C, HW, G);
  int cb = 0;
  stage_chunk<T, VW, VEC>(x + cur.off, cur.j0, cur.j1, bufs[cb]);
  publish<T, VW>(cur, x, bufs[cb], split, ws, counters, scratch);
  for (;;) {
    const bool more = cur.ng + teams < slices;
    const Ticket next = chunk_of<T>(more ? cur.ng + teams : cur.ng, k, C, HW, G);
    if (more) stage_chunk<T, VW, VEC>(x + next.off, next.j0, next.j1, bufs[cb ^ 1]);
    finish<T, TW, TS, VW, VEC>(cur, x, w, b, y, mean_out, rstd_out, ws, counters, split, C, HW, G, eps, bufs[cb],
                               scratch, stats, &gave_up);
    if (!more) return;
    publish<T, VW>(next, x, bufs[cb ^ 1], split, ws, counters, scratch);
    cur = next;
    cb ^= 1;
  }
}

// Chunks per slice for elements of `elem_bytes`. The workspace is sized for
// 4-byte elements (the most chunks), so it is known before the dtype is.
inline int64_t split_of(const GnArgs& a, int elem_bytes) {
  const int64_t n_el = a.C / a.G * a.HW, chunk = CHUNK_BYTES / elem_bytes;
  return (n_el + chunk - 1) / chunk;
}
inline int64_t moments_bytes(const GnArgs& a) {
  return a.N * a.G * split_of(a, 4) * 3 * static_cast<int64_t>(sizeof(float));
}
inline int64_t workspace_needed(const GnArgs& a) {
  return moments_bytes(a) + a.N * a.G * static_cast<int64_t>(sizeof(int));
}

template <class T, class TW, class TS>
int launch(const GnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  const int64_t groups = a.N * a.G, split = split_of(a, sizeof(T));
  if (a.C / a.G * a.HW > 0x7fffffffLL || a.HW > 0x7fffffffLL) return 1;
  const bool vec = aligned16(a.x) && aligned16(a.y) && a.HW % VW == 0;
  float* ws = static_cast<float*>(a.workspace);
  int* counters = reinterpret_cast<int*>(static_cast<char*>(a.workspace) + moments_bytes(a));
  constexpr int smem = 2 * CHUNK_BYTES;
  auto run = [&](auto kernel) {
    // The blocks that fit at once (shared memory bounds them): the grid, and
    // a group's chunks must fit in it (see the top of the file).
    int dev = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, BLOCK, smem) != cudaSuccess)
      return 1;
    const int64_t teams = static_cast<int64_t>(sms) * per_sm / split;
    if (teams < 1) return 1;  // a slice's chunks would not fit at once
    const int64_t used = teams < groups ? teams : groups;
    const int64_t reset_blocks = (groups + 255) / 256;
    gn_reset<<<static_cast<unsigned>(reset_blocks < 1024 ? reset_blocks : 1024), 256, 0, stream>>>(counters, groups);
    if (launch_status()) return 1;
    kernel<<<static_cast<unsigned>(used * split), BLOCK, smem, stream>>>(
        static_cast<const T*>(a.x), static_cast<const TW*>(a.w), static_cast<const TW*>(a.b),
        static_cast<T*>(a.y), static_cast<TS*>(a.mean), static_cast<TS*>(a.rstd), ws, counters,
        static_cast<int>(split), static_cast<int>(used), groups, a.C, static_cast<int>(a.HW), a.G, a.eps);
    return launch_status();
  };
  return vec ? run(gn_team<T, TW, TS, VW, true>) : run(gn_team<T, TW, TS, VW, false>);
}

#include "../_common/group_norm_cuda_parse.cuh"  // dtype dispatch and argument checks: inlined when forge loads the template
#include "../_common/group_norm_cuda_entry.cuh"  // the entry points: inlined when forge loads the template
