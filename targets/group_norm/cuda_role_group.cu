/* group_norm, CUDA strategy "role_group": one resident grid whose warps have
 * fixed roles. Producer warps stream x from HBM and publish per-job partial
 * moments; consumer warps, a window behind them, re-read the same bytes
 * (from L2, if the window fits) and write y. The two streams run at the same
 * time on every SM, so HBM sees the statistics' reads and the normalize's
 * writes together, and x's second read should come from L2: one read and one
 * write of HBM, where split_group does two reads and one write.
 *
 * Why warps, not blocks: the designs before it (PERF.md runs G, I, M) lost
 * their time to block-wide chains (barriers, tickets, the slowest block of a
 * slice). Here nothing waits on a block: a warp reduces its job with shuffles
 * and publishes it alone; a consumer warp waits only for its own slice.
 *
 * Jobs: a slice (n, g) of n_el = C/G*HW elements is cut into split = ceil(
 * n_el/JOB) jobs of JOB = JOB_KB KB; job t is (slice t/split, part t%split),
 * slice-major. Producer warp p of P takes jobs p, p+P, ...; consumer warp q of
 * Q takes q, q+Q, ... Math as split_group's (group_norm_moments.cuh): each
 * job's shifted partial {n, mean, M2} goes to its own slot; the producer warp
 * whose arrival completes a slice merges the slice's slots in a fixed order
 * (warp_merge: the same bits whoever merges) and publishes {mean, rstd}.
 *
 * Window: a producer waits before job t until consumers have finished
 * t - lead jobs (a count, not a watermark: it is only a cache hint), lead =
 * max(LEAD_MB in jobs, split). Deadlock-free because lead >= split: every
 * job below the lowest producer's slice is ready to consume, so consumers
 * always reach that producer's threshold. LEAD_MB 0: no window.
 *
 * Publishing {mean, rstd} is one 64-bit release store, read with one acquire
 * load; 0 bits are "not yet" (the workspace is zeroed first). rstd is never
 * +0 by then: a rstd of +0 (var + eps overflowed) is published as -0, which
 * computes the same y.
 *
 * Workspace: [consumed u32, pad][count u32 per slice][final u64 per slice]
 * [3 floats per job]; the counters are zeroed by a one-block kernel, and the
 * main kernel is its programmatic dependent (it waits only before the
 * counters). All warps must be resident at once: the grid is the occupancy
 * API's blocks per SM times the SMs (a later block would still start once
 * another kernel left, so a shared GPU delays it, it does not hang).
 *
 * Op, shapes, checks and entry points: as split_group (group_norm_cuda_entry.cuh).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 512 /* threads per block: 256, 512, 1024 */
#endif
#ifndef FORGE_P_PROD
#define FORGE_P_PROD 6 /* producer warps per block; the rest are consumers */
#endif
#ifndef FORGE_P_JOB_KB
#define FORGE_P_JOB_KB 16 /* bytes of x per warp job, KB */
#endif
#ifndef FORGE_P_LEAD_MB
#define FORGE_P_LEAD_MB 16 /* producers' lead over consumers, MB (0: none) */
#endif
#ifndef FORGE_P_UNROLL
#define FORGE_P_UNROLL 4 /* 16-byte vectors in flight per lane */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int WARPS = BLOCK / 32;
constexpr int PROD = FORGE_P_PROD;
constexpr int64_t JOB_BYTES = static_cast<int64_t>(FORGE_P_JOB_KB) * 1024;
constexpr int64_t LEAD_BYTES = static_cast<int64_t>(FORGE_P_LEAD_MB) << 20;
constexpr int UNROLL = FORGE_P_UNROLL;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(PROD >= 1 && PROD < WARPS, "FORGE_P_PROD: 1 .. warps per block - 1");
static_assert(FORGE_P_JOB_KB >= 1 && FORGE_P_JOB_KB <= 1024, "FORGE_P_JOB_KB: 1..1024");
static_assert(UNROLL >= 1 && UNROLL <= 8, "FORGE_P_UNROLL: 1..8");

#include "../_common/group_norm_args.h"  // the call's fields: inlined when forge loads the template

#include "../_common/group_norm_apply_range.cuh"  // load_batch, store_batch: inlined when forge loads the template

#include "../_common/group_norm_moments.cuh"  // Moments, merge, warp_merge: inlined when forge loads the template

// The workspace's parts for S slices and J jobs.
struct Layout {
  int64_t slices, jobs;
  __host__ __device__ int64_t count_off() const { return 16; }
  __host__ __device__ int64_t final_off() const { return (count_off() + 4 * slices + 7) / 8 * 8; }
  __host__ __device__ int64_t part_off() const { return final_off() + 8 * slices; }
  __host__ __device__ int64_t bytes() const { return part_off() + 12 * jobs; }
};

__device__ __forceinline__ unsigned long long load_acquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned load_relaxed(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__global__ void gn_role_zero(unsigned* counters, int64_t words) {
  asm volatile("griddepcontrol.launch_dependents;");
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) counters[i] = 0;
}

// One call's fixed fields.
struct Job {
  int64_t n_el, split, jobs, elems;  // elems: elements per job
};

// A producer warp's jobs: partial moments per job; the warp completing a
// slice merges it and publishes {mean, rstd} (rounded to the stats dtype, as
// split_group normalizes with them) and writes the mean/rstd outputs.
template <class T, class TS, int VW, bool VEC>
__device__ __forceinline__ void produce(const T* __restrict__ x, TS* __restrict__ mean_out,
                                        TS* __restrict__ rstd_out, unsigned char* ws, const Layout& L,
                                        const Job& J, float eps, int64_t first, int64_t stride, int64_t lead) {
  const int lane = threadIdx.x & 31;
  constexpr int64_t STEP = 32 * VW;
  unsigned* consumed = reinterpret_cast<unsigned*>(ws);
  unsigned* count = reinterpret_cast<unsigned*>(ws + L.count_off());
  unsigned long long* fin = reinterpret_cast<unsigned long long*>(ws + L.final_off());
  float* part = reinterpret_cast<float*>(ws + L.part_off());
  int64_t allowed = lead;  // jobs below this may start (consumed + lead, last read)
  for (int64_t t = first; t < J.jobs; t += stride) {
    if (LEAD_BYTES > 0 && t >= allowed) {
      for (unsigned ns = 64;; ns = ns < 2048 ? 2 * ns : ns) {
        allowed = static_cast<int64_t>(__shfl_sync(0xffffffffu, lane == 0 ? load_relaxed(consumed) : 0u, 0)) + lead;
        if (t < allowed) break;
        __nanosleep(ns);
      }
    }
    const int64_t s = t / J.split, k = t % J.split;
    const int64_t j0 = k * J.elems, j1 = j0 + J.elems < J.n_el ? j0 + J.elems : J.n_el;
    const T* xs = x + s * J.n_el;
    const float K = Io<T>::to(xs[j0]);
    float s1 = 0.0f, s2 = 0.0f;
    for (int64_t j = j0 + lane * VW; j < j1; j += STEP * UNROLL) {
      float v[UNROLL][VW];
      load_batch<T, VW, VEC, UNROLL>(xs, j, j1, STEP, v);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        if (j + u * STEP >= j1) break;
#pragma unroll
        for (int e = 0; e < VW; ++e) {
          const float d = v[u][e] - K;
          s1 += d;
          s2 += d * d;
        }
      }
    }
    s1 = group_sum<32>(s1);
    s2 = group_sum<32>(s2);
    unsigned arrived = 0;
    if (lane == 0) {
      const float cnt = static_cast<float>(j1 - j0);
      float* slot = part + t * 3;
      slot[0] = cnt;
      slot[1] = K + s1 / cnt;
      slot[2] = s2 - s1 * s1 / cnt;
      __threadfence();  // the slot before the count (the merging warp reads it after its own fence)
      arrived = atomicAdd(count + s, 1u) + 1;
    }
    arrived = __shfl_sync(0xffffffffu, arrived, 0);
    if (arrived != J.split) continue;
    __threadfence();
    const Moments m = warp_merge(part + s * J.split * 3, J.split);
    if (lane == 0) {
      const float var = m.m2 / static_cast<float>(J.n_el);
      const TS mean_t = Io<TS>::from(m.mean), rstd_t = Io<TS>::from(rsqrtf(var + eps));
      mean_out[s] = mean_t;
      rstd_out[s] = rstd_t;
      const float mean = Io<TS>::to(mean_t);
      unsigned rbits = __float_as_uint(Io<TS>::to(rstd_t));
      if (rbits == 0) rbits = 0x80000000u;  // -0: nonzero bits, the same y
      store_release(fin + s, (static_cast<unsigned long long>(rbits) << 32) | __float_as_uint(mean));
    }
  }
}

// A consumer warp's jobs: the slice's {mean, rstd} (waiting for them only if
// the producers have not finished the slice), then y = fma(x, scale, bias).
// Its loads of x are the last use: they are issued before the wait.
template <class T, class TW, int VW, bool VEC>
__device__ __forceinline__ void consume(const T* __restrict__ x, const TW* __restrict__ w,
                                        const TW* __restrict__ b, T* __restrict__ y, unsigned char* ws,
                                        const Layout& L, const Job& J, int64_t D, DivU32 hw, int64_t G,
                                        int64_t first, int64_t stride) {
  const int lane = threadIdx.x & 31;
  constexpr int64_t STEP = 32 * VW;
  unsigned* consumed = reinterpret_cast<unsigned*>(ws);
  const unsigned long long* fin = reinterpret_cast<const unsigned long long*>(ws + L.final_off());
  for (int64_t t = first; t < J.jobs; t += stride) {
    const int64_t s = t / J.split, k = t % J.split;
    const int64_t j0 = k * J.elems, j1 = j0 + J.elems < J.n_el ? j0 + J.elems : J.n_el;
    const T* xs = x + s * J.n_el;
    T* ys = y + s * J.n_el;
    float v[UNROLL][VW];
    load_batch<T, VW, VEC, UNROLL>(xs, j0 + lane * VW, j1, STEP, v);
    // Waiting warps back off to 2 us: thousands of them polling a few words
    // would queue the L2 slices that hold those words (and x's lines there).
    unsigned long long st;
    for (unsigned ns = 64; (st = load_acquire(fin + s)) == 0; ns = ns < 2048 ? 2 * ns : ns) __nanosleep(ns);
    const float mean = __uint_as_float(static_cast<unsigned>(st)),
                rstd = __uint_as_float(static_cast<unsigned>(st >> 32));
    const int64_t c0 = (s % G) * D;
    for (int64_t j = j0 + lane * VW; j < j1; j += STEP * UNROLL) {
      if (j != j0 + lane * VW) load_batch<T, VW, VEC, UNROLL>(xs, j, j1, STEP, v);
      store_batch<T, TW, VW, VEC, UNROLL, true>(ys, w, b, c0, hw, j, j1, STEP, mean, rstd, v);
    }
    if (LEAD_BYTES > 0 && lane == 0) atomicAdd(consumed, 1u);
  }
}

// At least 1,024 threads per SM (64 registers): 32 warps keep the bytes in flight.
template <class T, class TW, class TS, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK, BLOCK >= 1024 ? 1 : 1024 / BLOCK)
    gn_role(const T* __restrict__ x, const TW* __restrict__ w, const TW* __restrict__ b, T* __restrict__ y,
            TS* __restrict__ mean_out, TS* __restrict__ rstd_out, unsigned char* ws, Layout L, Job J, int64_t D,
            int64_t G, float eps, DivU32 hw, int64_t lead) {
  // The counters are zeroed by the kernel before this one: wait for it (a
  // programmatic dependent launch) before any warp touches them.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int warp = threadIdx.x >> 5;
  if (warp < PROD)
    produce<T, TS, VW, VEC>(x, mean_out, rstd_out, ws, L, J, eps, static_cast<int64_t>(blockIdx.x) * PROD + warp,
                            static_cast<int64_t>(gridDim.x) * PROD, lead);
  else
    consume<T, TW, VW, VEC>(x, w, b, y, ws, L, J, D, hw, G,
                            static_cast<int64_t>(blockIdx.x) * (WARPS - PROD) + warp - PROD,
                            static_cast<int64_t>(gridDim.x) * (WARPS - PROD));
}

inline Layout layout_of(const GnArgs& a, int64_t elem_bytes) {
  const int64_t n_el = a.C / a.G * a.HW, elems = JOB_BYTES / elem_bytes;
  return Layout{a.N * a.G, a.N * a.G * ((n_el + elems - 1) / elems)};
}
inline int64_t workspace_needed(const GnArgs& a) { return layout_of(a, dtype_size(a.x_dtype)).bytes(); }

template <class T, class TW, class TS>
int launch(const GnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  const bool vec = aligned16(a.x) && aligned16(a.y) && a.HW % VW == 0;
  const Layout L = layout_of(a, sizeof(T));
  const int64_t n_el = a.C / a.G * a.HW, elems = JOB_BYTES / static_cast<int64_t>(sizeof(T));
  const Job J{n_el, (n_el + elems - 1) / elems, L.jobs, elems};
  const int64_t lead_jobs = LEAD_BYTES / JOB_BYTES;
  const int64_t lead = lead_jobs > J.split ? lead_jobs : J.split;
  unsigned char* ws = static_cast<unsigned char*>(a.workspace);
  gn_role_zero<<<1, 256, 0, stream>>>(reinterpret_cast<unsigned*>(ws), L.part_off() / 4);
  if (launch_status()) return 1;
  auto run = [&](auto kernel) {
    int dev = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, BLOCK, 0) != cudaSuccess || per_sm < 1)
      return cudaErrorInvalidConfiguration;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(sms * per_sm));
    cfg.blockDim = dim3(BLOCK);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<const T*>(a.x), static_cast<const TW*>(a.w),
                              static_cast<const TW*>(a.b), static_cast<T*>(a.y), static_cast<TS*>(a.mean),
                              static_cast<TS*>(a.rstd), ws, L, J, a.C / a.G, a.G, a.eps,
                              DivU32::of(static_cast<uint32_t>(a.HW)), lead);
  };
  const cudaError_t e = vec ? run(gn_role<T, TW, TS, VW, true>) : run(gn_role<T, TW, TS, 1, false>);
  return e == cudaSuccess && !launch_status() ? 0 : 1;
}

#include "../_common/group_norm_cuda_entry.cuh"  // argument checks and the entry points: inlined when forge loads the template
