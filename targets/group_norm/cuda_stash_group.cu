/* group_norm, CUDA strategy "stash_group": one cooperative kernel that reads
 * most of x from HBM once. A resident grid (one or two blocks per SM) splits
 * x into one contiguous range per block. Pass 1 streams the range forward:
 * per (block, slice) segment it sums shifted moments into the workspace, and
 * it keeps the range's last SMEM_KB in shared memory (loaded evict-first, so
 * L2 keeps the bytes before them). One grid barrier. Pass 2 merges each
 * touched slice's partials and normalizes the range backwards: the stash
 * from shared memory, then what pass 1 read last, still in L2, then the rest
 * from HBM. y is stored evict-first, so it does not push x out of L2.
 *
 * On an H200 (132 SMs x 227 KB of shared memory, 50 MB of L2) a 64 MB bf16
 * input leaves ~500 KB per block: ~190 KB in shared memory and most of the
 * rest in L2. split_group reads all of x twice from HBM (PERF.md run H);
 * run I's designs avoided that with many small synchronizations and lost,
 * so this one synchronizes once.
 *
 * Math: per segment (the part of one (n, g) slice inside one block's range),
 * K = its first element, S1 = sum (x - K), S2 = sum (x - K)^2 -> {n, mean,
 * M2}; a slice's segments merged in block order (group_norm_moments.cuh:
 * the same bits in every block); then as split_group: scale = rstd * w[c],
 * bias = fma(-scale, mean, b[c]), y = fma(x, scale, bias), normalizing with
 * mean/rstd as stored in the outputs' dtype like stock.
 * Op: aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias,
 *     SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (out, mean, rstd).
 * Workspace (forge_workspace_bytes): 3 floats per segment; segment (b, s) is
 * slot b + s (both grow along x, so the slots are distinct), at most
 * MAX_GRID + N*G of them.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * as split_group (NCHW-contiguous float32/float16/bfloat16, C % group == 0,
 * weight/bias of the input's dtype or float32, mean/rstd N*G contiguous);
 * x and y 16-byte aligned and HxW a multiple of 16 bytes of elements (whole
 * vectors per channel); a slice below 2^31 elements; the cooperative launch
 * accepted (else 1).
 */
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 1024 /* threads per block: 512, 1024 */
#endif
#ifndef FORGE_P_VECS
#define FORGE_P_VECS 4 /* 16-byte vectors per thread in flight per tile: 2, 4, 8 */
#endif
#ifndef FORGE_P_SMEM_KB
#define FORGE_P_SMEM_KB 192 /* the stash per block (0: none; then only L2 keeps the tail) */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int VECS = FORGE_P_VECS;
constexpr int64_t STASH_BYTES = static_cast<int64_t>(FORGE_P_SMEM_KB) << 10;
constexpr int64_t MAX_GRID = 2048;  // bounds the workspace before the grid is known
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(VECS >= 1 && VECS <= 16, "FORGE_P_VECS: 1..16");
static_assert(FORGE_P_SMEM_KB >= 0 && FORGE_P_SMEM_KB <= 227, "FORGE_P_SMEM_KB: 0..227");

#include "../_common/group_norm_args.h"  // the call's fields: inlined when forge loads the template

#include "../_common/group_norm_moments.cuh"  // Moments, merge, warp_merge: inlined when forge loads the template

// Where things lie, in 16-byte vectors of x.
struct Layout {
  int64_t total_v;  // all of x
  int64_t slice_v;  // one (n, g) slice
  int64_t per_v;    // one block's range (the last one may be shorter)
  int64_t stash_v;  // the stash's capacity
};

template <class T, int VW>
__device__ __forceinline__ Pack<T, VW> load_vec(const Pack<T, VW>* p, bool evict_first) {
  if (evict_first) {
    const int4 r = __ldcs(reinterpret_cast<const int4*>(p));
    return *reinterpret_cast<const Pack<T, VW>*>(&r);
  }
  return *p;
}

template <class T, class TW, class TS, int VW>
__global__ void __launch_bounds__(BLOCK)
    gn_stash(const T* __restrict__ x, const TW* __restrict__ w, const TW* __restrict__ b, T* __restrict__ y,
             TS* __restrict__ mean_out, TS* __restrict__ rstd_out, float* __restrict__ part, Layout L, int64_t C,
             int64_t HW, int64_t G, float eps, DivU32 hw) {
  extern __shared__ int4 stash_raw[];
  Pack<T, VW>* stash = reinterpret_cast<Pack<T, VW>*>(stash_raw);
  __shared__ float scratch[32];
  __shared__ float s_stats[2];
  // Offsets inside the block's range fit in 32 bits (launch checks): one base
  // pointer per range, not 64-bit arithmetic per vector.
  const int64_t bid = blockIdx.x;
  const int64_t r0 = bid * L.per_v;
  const int n = static_cast<int>((r0 + L.per_v < L.total_v ? r0 + L.per_v : L.total_v) - r0);
  const int stash0 = n - L.stash_v > 0 ? n - static_cast<int>(L.stash_v) : 0;
  const Pack<T, VW>* xr = reinterpret_cast<const Pack<T, VW>*>(x) + r0;
  Pack<T, VW>* yr = reinterpret_cast<Pack<T, VW>*>(y) + r0;
  constexpr int TILE = BLOCK * VECS;

  // Pass 1: moments per segment, the range's tail into the stash.
  for (int seg0 = 0; seg0 < n;) {
    const int64_t s = (r0 + seg0) / L.slice_v;
    const int64_t end = (s + 1) * L.slice_v - r0;
    const int seg1 = end < n ? static_cast<int>(end) : n;
    const float K = Io<T>::to(xr[seg0].v[0]);
    float s1 = 0.0f, s2 = 0.0f;
    for (int t = seg0 + static_cast<int>(threadIdx.x); t < seg1; t += TILE) {
      Pack<T, VW> v[VECS];
#pragma unroll
      for (int u = 0; u < VECS; ++u) {
        const int i = t + u * BLOCK;
        if (i < seg1) v[u] = load_vec<T, VW>(xr + i, i >= stash0);
      }
#pragma unroll
      for (int u = 0; u < VECS; ++u) {
        const int i = t + u * BLOCK;
        if (i >= seg1) break;
        if (i >= stash0) stash[i - stash0] = v[u];
#pragma unroll
        for (int e = 0; e < VW; ++e) {
          const float d = Io<T>::to(v[u].v[e]) - K;
          s1 += d;
          s2 += d * d;
        }
      }
    }
    s1 = block_sum(s1, scratch);
    s2 = block_sum(s2, scratch);
    if (threadIdx.x == 0) {
      const float cnt = static_cast<float>((seg1 - seg0) * VW);
      float* slot = part + (bid + s) * 3;
      slot[0] = cnt;
      slot[1] = K + s1 / cnt;
      slot[2] = s2 - s1 * s1 / cnt;
    }
    seg0 = seg1;
  }
  cooperative_groups::this_grid().sync();  // every partial written and visible

  // Pass 2: the range backwards, segment by segment, tile by tile.
  const int64_t D = C / G, n_el = L.slice_v * VW;
  for (int seg1 = n; seg1 > 0;) {
    const int64_t s = (r0 + seg1 - 1) / L.slice_v;
    const int64_t start = s * L.slice_v - r0;  // the slice's start, relative (may be before the range)
    const int seg0 = start > 0 ? static_cast<int>(start) : 0;
    if (threadIdx.x < 32) {
      // Slice s's segments: blocks b_first..b_last, slots b + s, contiguous.
      const int64_t b_first = s * L.slice_v / L.per_v, b_last = ((s + 1) * L.slice_v - 1) / L.per_v;
      const Moments m = warp_merge(part + (b_first + s) * 3, b_last - b_first + 1);
      if (threadIdx.x == 0) {
        const float var = m.m2 / static_cast<float>(n_el);
        const TS mean_s = Io<TS>::from(m.mean), rstd_s = Io<TS>::from(rsqrtf(var + eps));
        if (start >= 0) {  // this block holds the slice's start: it writes mean and rstd
          mean_out[s] = mean_s;
          rstd_out[s] = rstd_s;
        }
        s_stats[0] = Io<TS>::to(mean_s);
        s_stats[1] = Io<TS>::to(rstd_s);
      }
    }
    __syncthreads();
    const float mean = s_stats[0], rstd = s_stats[1];
    const int64_t c0 = (s % G) * D;
    const int off = static_cast<int>(-start);  // range offset i is slice offset i + off
    for (int t0 = seg0 + (seg1 - seg0 - 1) / TILE * TILE; t0 >= seg0; t0 -= TILE) {
      const int t = t0 + static_cast<int>(threadIdx.x);
      Pack<T, VW> v[VECS];
#pragma unroll
      for (int u = 0; u < VECS; ++u) {
        const int i = t + u * BLOCK;
        if (i < seg1) v[u] = i >= stash0 ? stash[i - stash0] : xr[i];
      }
#pragma unroll
      for (int u = 0; u < VECS; ++u) {
        const int i = t + u * BLOCK;
        if (i >= seg1) break;
        const int64_t c = c0 + hw.div(static_cast<uint32_t>((i + off) * VW));
        const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
        const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
        float o[VW];
#pragma unroll
        for (int e = 0; e < VW; ++e) o[e] = fmaf(Io<T>::to(v[u].v[e]), scale, bias);
        store_n<T, VW, true>(reinterpret_cast<T*>(yr + i), o);
      }
    }
    __syncthreads();  // s_stats is rewritten for the next segment
    seg1 = seg0;
  }
}

inline int64_t workspace_needed(const GnArgs& a) {
  return (MAX_GRID + a.N * a.G) * 3 * static_cast<int64_t>(sizeof(float));
}

template <class T, class TW, class TS>
int launch(const GnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  const int64_t n_el = a.C / a.G * a.HW;
  if (!aligned16(a.x) || !aligned16(a.y) || a.HW % VW != 0 || n_el >= 0x7fffffffLL) return 1;
  auto kernel = gn_stash<T, TW, TS, VW>;
  const int smem = static_cast<int>(STASH_BYTES);
  // The resident grid, asked once per instance (shared memory decides it).
  static const int64_t resident = [&] {
    int dev = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, BLOCK, smem) != cudaSuccess)
      return int64_t{0};
    return static_cast<int64_t>(sms) * per_sm;
  }();
  if (resident < 1) return 1;
  Layout L;
  L.total_v = a.N * a.C * a.HW / VW;
  L.slice_v = n_el / VW;
  const int64_t tile = static_cast<int64_t>(BLOCK) * VECS;
  int64_t grid = resident < MAX_GRID ? resident : MAX_GRID;
  if (grid > (L.total_v + tile - 1) / tile) grid = (L.total_v + tile - 1) / tile;  // a tile per block at least
  L.per_v = (L.total_v + grid - 1) / grid;
  grid = (L.total_v + L.per_v - 1) / L.per_v;  // no empty block
  if (L.per_v >= 0x7fffffffLL) return 1;
  L.stash_v = STASH_BYTES / 16;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(BLOCK);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, static_cast<const T*>(a.x), static_cast<const TW*>(a.w),
                                           static_cast<const TW*>(a.b), static_cast<T*>(a.y), static_cast<TS*>(a.mean),
                                           static_cast<TS*>(a.rstd), static_cast<float*>(a.workspace), L, a.C, a.HW,
                                           a.G, a.eps, DivU32::of(static_cast<uint32_t>(a.HW)));
  return e == cudaSuccess && !launch_status() ? 0 : 1;
}

#include "../_common/group_norm_cuda_entry.cuh"  // argument checks and the entry points: inlined when forge loads the template
