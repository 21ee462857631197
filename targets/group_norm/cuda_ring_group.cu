/* group_norm, CUDA strategy "ring_group": x read once, each chunk held in a
 * shared-memory ring from its load until its slice's statistics are known.
 *
 * The call's slices are cut into chunks of CHUNK_KB (a slice's last chunk
 * may be shorter), numbered slice by slice. A persistent grid of resident
 * CTAs takes them round-robin: CTA b's i-th chunk is chunk i*grid + b, so
 * round i of the grid covers `grid` consecutive chunks. Each CTA walks its
 * chunks through a ring of STAGES stages:
 *   - thread 0 keeps the bulk copy engine loading chunks ahead (cp.async.bulk
 *     into the ring; no registers or threads spent on loads in flight);
 *   - step i: the CTA sums chunk i from shared memory and its last warp
 *     publishes the partial moments (a workspace slot, then the slice's
 *     arrival counter) while the other warps go on;
 *     the slice's last arrival merges its partials and stores the slice's
 *     mean and rstd as one 64-bit word;
 *   - then it normalizes chunk i - lag, still in the ring: it waits for that
 *     word (loaded before step i's statistics, so normally there), writes y.
 * So every byte of x crosses HBM once, and the wait is normally over before
 * it starts: lag steps after its own statistics, a chunk's slice needs only
 * the chunks other CTAs summed by then (below).
 *
 * Math as split_group (the same partials where CHUNK_KB * 1024 / sizeof(T)
 * is its CHUNK): chunk k of slice s, fp32, K = its first element, S1 = sum (x - K),
 * S2 = sum (x - K)^2, partial {n_k, K + S1/n_k, S2 - S1^2/n_k}; merged in
 * chunk order by warp_merge (Chan et al.; the same bits in every CTA);
 * var = M2/|s|, rstd = rsqrt(var + eps), both rounded to the outputs' dtype as
 * the stock CUDA kernel keeps them; scale = rstd * w[c],
 * bias = fma(-scale, mean, b[c]), y = fma(x, scale, bias).
 * Op: aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias,
 *     SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (out, mean, rstd).
 * Shapes: input [N, C, *] NCHW; out like input; mean/rstd [N, G].
 * Workspace: per slice a statistics word ({mean, rstd}, or NOT_READY) and an
 * arrival counter, reset by a one-block kernel launched first (with PDL the
 * ring kernel starts loading while it runs, and waits for it before the first
 * counter); then a slot of 3 floats per chunk.
 *
 * Deadlock freedom: the grid is resident at once (a cooperative launch of at
 * most occupancy x SMs CTAs), and a CTA blocks only in step i's wait, after
 * publishing chunk i (and merging its slice, if it arrived last).
 * Take the blocked CTA with the smallest step i: every CTA has published all
 * its chunks up to round i. The slice it waits for holds cps consecutive
 * chunks, which span at most span = ceil((cps - 1) / grid) + 1 rounds from
 * round i - lag; with lag >= span - 1 they all lie in rounds <= i. LAG adds
 * steps of slack beyond that minimum (lag = span - 1 + LAG) so that a CTA
 * rarely waits at all; lag <= STAGES - 1 keeps the chunk in the ring (else
 * the call returns 1 and the package falls back). bench/gpu/ring_schedule.py
 * plays the schedule out in random orders on the CPU: no deadlock under this
 * rule, and deadlocks at one step less wherever a slice has more chunks than
 * the grid has CTAs.
 *
 * Assumptions, checked at run time (nonzero return = the package falls
 * back): as split_group, plus 16-byte aligned x and y and slices of a whole
 * number of 16-byte vectors (the bulk copy's unit), slices under 2^31
 * elements and chunks under 2^32, a lag the ring can hold, and a cooperative
 * launch the driver accepts.
 *
 * Why it should be fast: split_group reads x twice, and a kernel at copy
 * speed with two reads reaches 60% of the floor (docs/PERF.md, "The floor at
 * each target's size"). The one-read designs in
 * bench/results/rejected_designs.jsonl paid for synchronization: a block waited
 * for its slice right after its own part (a chain of latencies per round, a
 * convoy of the slowest block), or held its data in registers at the cost of
 * occupancy. Here the wait is lag rounds behind, the loads ahead are the copy
 * engine's, and nothing but the ring holds data.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <atomic>

#include "forge_kernel.h"

#ifndef FORGE_P_BLOCK
#define FORGE_P_BLOCK 256 /* threads per CTA: 256, 512, 128 */
#endif
#ifndef FORGE_P_CHUNK_KB
#define FORGE_P_CHUNK_KB 16 /* bytes per chunk (one bulk copy), in KB: 16, 32, 8 */
#endif
#ifndef FORGE_P_STAGES
#define FORGE_P_STAGES 6 /* chunks in the ring per CTA: 6, 12, 4 (STAGES * CHUNK_KB <= 224) */
#endif
#ifndef FORGE_P_LAG
#define FORGE_P_LAG 1 /* steps of slack beyond the least lag that cannot deadlock: 1, 2, 0 */
#endif
#ifndef FORGE_P_PDL
#define FORGE_P_PDL 1 /* 1: the ring kernel as a programmatic dependent launch of the counter clear */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int64_t CHUNK_BYTES = static_cast<int64_t>(FORGE_P_CHUNK_KB) << 10;
constexpr int STAGES = FORGE_P_STAGES;
constexpr int LAG = FORGE_P_LAG;
constexpr bool PDL = FORGE_P_PDL != 0;
constexpr int64_t RING_BYTES = STAGES * CHUNK_BYTES;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(FORGE_P_CHUNK_KB >= 1 && FORGE_P_CHUNK_KB <= 64, "FORGE_P_CHUNK_KB: 1..64");
static_assert(STAGES >= 2 && STAGES <= 64, "FORGE_P_STAGES: 2..64");
static_assert(RING_BYTES <= 224 * 1024, "FORGE_P_STAGES * FORGE_P_CHUNK_KB: at most 224 KB of shared memory");
static_assert(LAG >= 0 && LAG < STAGES, "FORGE_P_LAG: 0..STAGES-1");

#include "../_common/group_norm_args.h"  // the call's fields: inlined when forge loads the template

#include "../_common/group_norm_moments.cuh"  // Moments, merge, warp_merge: inlined when forge loads the template

#include "../_common/bulk_copy.cuh"  // bulk_load, bulk_wait: inlined when forge loads the template

// The chunking of one call; the same for every grid size, so results do not
// depend on the GPU's SM count.
struct Ring {
  int64_t slice;  // elements per (n, g) slice
  int64_t che;    // elements per chunk
  int64_t cps;    // chunks per slice
  int64_t total;  // chunks in the call
};
inline Ring ring_of(const GnArgs& a) {
  Ring r;
  r.slice = a.C / a.G * a.HW;
  r.che = CHUNK_BYTES / static_cast<int64_t>(dtype_size(a.x_dtype));
  r.cps = (r.slice + r.che - 1) / r.che;
  r.total = a.N * a.G * r.cps;
  return r;
}
// Workspace: per slice its statistics word and arrival counter (both reset
// per call), then a slot {n, mean, M2} per chunk.
inline int64_t workspace_needed(const GnArgs& a) {
  const Ring r = ring_of(a);
  return a.N * a.G * static_cast<int64_t>(sizeof(unsigned long long) + sizeof(unsigned)) +
         r.total * 3 * static_cast<int64_t>(sizeof(float));
}
// The least lag that cannot deadlock, plus LAG: the rounds one slice spans, less one.
inline int64_t lag_of(int64_t cps, int64_t grid) { return (cps - 1 + grid - 1) / grid + LAG; }

// A slice's statistics as one 64-bit word, {mean, rstd} as fp32 bits, so one
// load gives both or neither: nothing else is read after it, and it needs no
// acquire. NOT_READY (the clear kernel's) is never stored: a pair of all-ones
// NaNs is stored with one payload bit flipped.
constexpr unsigned long long NOT_READY = ~0ull;
__device__ __forceinline__ unsigned long long load_stats(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_stats(unsigned long long* p, float mean, float rstd) {
  unsigned long long v = (static_cast<unsigned long long>(__float_as_uint(rstd)) << 32) | __float_as_uint(mean);
  if (v == NOT_READY) v ^= 1u;  // two all-ones NaNs: still two NaNs
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// The threads that normalize (all warps but the last) and their barrier.
constexpr int NORMALIZERS = BLOCK - 32;
__device__ __forceinline__ void normalizers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(NORMALIZERS) : "memory");
}

// Both sums of a block at once (every thread gets them); scratch: 64 floats.
__device__ __forceinline__ void block_sum2(float& a, float& b, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  a = group_sum<32>(a);
  b = group_sum<32>(b);
  __syncthreads();  // scratch may still be read from the previous step
  if (lane == 0) {
    scratch[warp] = a;
    scratch[32 + warp] = b;
  }
  __syncthreads();
  a = group_sum<32>(lane < warps ? scratch[lane] : 0.0f);
  b = group_sum<32>(lane < warps ? scratch[32 + lane] : 0.0f);
}

// The arrival counters and statistics words, reset before the ring kernel's first use.
__global__ void gn_ring_clear(unsigned long long* __restrict__ stats, unsigned* __restrict__ arrived, int64_t n) {
  // The ring kernel may start now: it waits for this grid's completion
  // (griddepcontrol.wait) before it touches either.
  if (PDL) asm volatile("griddepcontrol.launch_dependents;");
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    stats[i] = NOT_READY;
    arrived[i] = 0u;
  }
}

// VEC: HW is a multiple of the vector width, so a vector lies in one channel.
// __launch_bounds__(BLOCK, 1): without the 1, nvcc 13 kept it to 40 registers
// and spilled; with it, 54-63, no spills (shared memory limits CTAs per SM anyway).
template <class T, class TW, class TS, bool VEC>
__global__ void __launch_bounds__(BLOCK, 1)
    gn_ring(const T* __restrict__ x, const TW* __restrict__ w, const TW* __restrict__ b, T* __restrict__ y,
            TS* __restrict__ mean_out, TS* __restrict__ rstd_out, float* __restrict__ slots,
            unsigned long long* __restrict__ words, unsigned* __restrict__ arrived, Ring r, int64_t C,
            int64_t HW, int64_t G, float eps, DivU32 hw, DivU32 per_slice, int64_t lag) {
  constexpr int VW = 16 / sizeof(T);
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) uint64_t full[STAGES];
  __shared__ float scratch[64];
  __shared__ float stats[2];
  const int64_t grid = gridDim.x, me = blockIdx.x;
  // Chunks of this CTA (the grid is at most r.total CTAs, r.total < 2^32): 32-bit division.
  const int64_t mine = static_cast<uint32_t>(r.total - 1 - me) / static_cast<uint32_t>(grid) + 1;
  const int64_t D = C / G;
  auto stage = [&](int64_t i) { return ring + (i % STAGES) * CHUNK_BYTES; };
  auto length = [&](int64_t k) {  // elements of a slice's chunk k
    const int64_t j0 = k * r.che;
    return r.slice - j0 < r.che ? r.slice - j0 : r.che;
  };
  // Chunk ids are below 2^32 (checked at launch): slice and chunk by multiply-shift.
  auto slice_of = [&](int64_t id) { return static_cast<int64_t>(per_slice.div(static_cast<uint32_t>(id))); };
  auto issue = [&](int64_t i) {  // thread 0: this CTA's chunk i into its stage
    const int64_t id = i * grid + me, ng = slice_of(id), k = id - ng * r.cps;
    bulk_load(stage(i), x + ng * r.slice + k * r.che, static_cast<uint32_t>(length(k) * sizeof(T)),
              &full[i % STAGES]);
  };
  // One warp: chunk id's partial into its slot, then its arrival; the
  // slice's last arrival merges every partial (chunk order: deterministic),
  // stores the outputs' mean and rstd, then the slice's statistics word.
  auto publish = [&](int64_t ng, int64_t id, int64_t n, float K, float s1, float s2) {
    const int lane = threadIdx.x & 31;
    unsigned before = 0;
    if (lane == 0) {
      const float cnt = static_cast<float>(n);
      float* slot = slots + id * 3;
      slot[0] = cnt;
      slot[1] = K + s1 / cnt;
      slot[2] = s2 - s1 * s1 / cnt;
      __threadfence();  // the slot before the arrival
      before = atomicAdd(arrived + ng, 1u);
    }
    before = __shfl_sync(0xffffffffu, before, 0);
    if (before + 1 != static_cast<unsigned>(r.cps)) return;
    __threadfence();  // every other chunk's slot, stored before its arrival, is visible
    const Moments m = warp_merge(slots + ng * r.cps * 3, r.cps);
    if (lane == 0) {
      const float var = m.m2 / static_cast<float>(r.slice);
      // Rounded to the outputs' dtype, as the stock CUDA kernel normalizes with them.
      const float mean = Io<TS>::to(Io<TS>::from(m.mean)), rstd = Io<TS>::to(Io<TS>::from(rsqrtf(var + eps)));
      mean_out[ng] = Io<TS>::from(mean);
      rstd_out[ng] = Io<TS>::from(rstd);
      store_stats(words + ng, mean, rstd);
    }
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) bulk_barrier_init(&full[s]);
    bulk_barrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int64_t i = 0; i < mine && i < STAGES; ++i) issue(i);
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");  // the counters are zero
  for (int64_t i = 0; i < mine + lag; ++i) {
    // Chunk q = i - lag, normalized at the end of this step. Its slice's
    // statistics word (thread 0) and its first channel's weight and bias are
    // loaded now and used only after chunk i's statistics: their latency
    // hides under them.
    const int64_t q = i - lag, qid = q * grid + me, qng = i >= lag ? slice_of(qid) : 0, qk = qid - qng * r.cps;
    // Channel arithmetic in 32 bits (C < 2^31, slice offsets < 2^31): a 64-bit
    // remainder is a call, and its saved registers spill.
    const int64_t c0 = static_cast<int64_t>(static_cast<uint32_t>(qng) % static_cast<uint32_t>(G)) * D;
    const int64_t qc = c0 + (i >= lag ? hw.div(static_cast<uint32_t>(qk * r.che)) : 0);
    unsigned long long early = NOT_READY;
    float w0 = 1.0f, b0 = 0.0f;  // what no weight and no bias mean: scale = rstd, bias = -scale * mean
    if (i >= lag && threadIdx.x < NORMALIZERS) {
      if (threadIdx.x == 0) early = load_stats(words + qng);
      if (w) w0 = Io<TW>::to(w[qc]);
      if (b) b0 = Io<TW>::to(b[qc]);
    }
    if (i < mine) {  // statistics of chunk i, published
      const int64_t id = i * grid + me, ng = slice_of(id), n = length(id - ng * r.cps);
      bulk_wait(&full[i % STAGES], static_cast<uint32_t>((i / STAGES) & 1));
      const T* cs = reinterpret_cast<const T*>(stage(i));
      const float K = Io<T>::to(cs[0]);
      float s1 = 0.0f, s2 = 0.0f;
      for (int64_t e = static_cast<int64_t>(threadIdx.x) * VW; e < n; e += static_cast<int64_t>(BLOCK) * VW) {
        float v[VW];
        load_n<T, VW>(cs + e, v);
#pragma unroll
        for (int u = 0; u < VW; ++u) {
          const float d = v[u] - K;
          s1 += d;
          s2 += d * d;
        }
      }
      block_sum2(s1, s2, scratch);
      if (threadIdx.x >= NORMALIZERS) publish(ng, id, n, K, s1, s2);  // the last warp
    }
    if (i >= lag) {  // chunk q = i - lag: its slice's statistics, then y
      // Every warp but the last, which publishes (its fence waits for its
      // own stores, so it stays out of the normalize and the barriers here).
      if (threadIdx.x >= NORMALIZERS) continue;
      const int64_t ng = qng, k = qk, n = length(k);
      if (threadIdx.x == 0) {
        while (early == NOT_READY) {
          __nanosleep(64);
          early = load_stats(words + ng);
        }
        stats[0] = __uint_as_float(static_cast<unsigned>(early));
        stats[1] = __uint_as_float(static_cast<unsigned>(early >> 32));
      }
      normalizers_sync();
      const float mean = stats[0], rstd = stats[1];
      const int64_t j0 = k * r.che;
      const T* cs = reinterpret_cast<const T*>(stage(q));
      T* ys = y + ng * r.slice + j0;
      for (int64_t e = static_cast<int64_t>(threadIdx.x) * VW; e < n; e += static_cast<int64_t>(NORMALIZERS) * VW) {
        float v[VW];
        load_n<T, VW>(cs + e, v);
        if (VEC) {
          const int64_t c = c0 + hw.div(static_cast<uint32_t>(j0 + e));
          const bool first = c == qc;  // a chunk within one channel (HW >= its length) is all first
          const float scale = rstd * (first ? w0 : w ? Io<TW>::to(w[c]) : 1.0f);
          const float bias = fmaf(-scale, mean, first ? b0 : b ? Io<TW>::to(b[c]) : 0.0f);
#pragma unroll
          for (int u = 0; u < VW; ++u) v[u] = fmaf(v[u], scale, bias);
        } else {
#pragma unroll
          for (int u = 0; u < VW; ++u) {
            const int64_t c = c0 + hw.div(static_cast<uint32_t>(j0 + e + u));
            const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
            v[u] = fmaf(v[u], scale, fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f));
          }
        }
        store_n<T, VW>(ys + e, v);
      }
      normalizers_sync();  // the stage and stats are read: both may be rewritten (the publisher
                           // read the stage before step q's block_sum2)
      if (threadIdx.x == 0 && q + STAGES < mine) issue(q + STAGES);
    }
  }
}

// A failed CUDA call of ours leaves its error for the caller's next check
// (the stock fallback's launch check would raise it): take it back.
inline int refuse() {
  cudaGetLastError();
  return 1;
}

template <class T, class TW, class TS, bool VEC>
int launch_ring(const GnArgs& a, const Ring& r, cudaStream_t stream) {
  auto kernel = gn_ring<T, TW, TS, VEC>;
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms < 1)
    return refuse();
  // CTAs per SM on this device, after its shared-memory opt-in (both are per
  // device): found on a device's first call and kept (0: not yet, -1: does not
  // fit). Racing first calls store the same value.
  constexpr int DEVICES = 64;
  static std::atomic<int> fits[DEVICES];
  int per_sm = dev < DEVICES ? fits[dev].load(std::memory_order_acquire) : 0;
  if (per_sm == 0) {
    int n = 0;
    per_sm = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(RING_BYTES)) ==
                         cudaSuccess &&
                     cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, BLOCK,
                                                                   static_cast<size_t>(RING_BYTES)) == cudaSuccess &&
                     n > 0
                 ? n
                 : -1;
    if (per_sm < 0) cudaGetLastError();
    if (dev < DEVICES) fits[dev].store(per_sm, std::memory_order_release);
  }
  if (per_sm < 0) return 1;
  const int64_t resident = static_cast<int64_t>(sms) * per_sm;
  const int64_t grid = r.total < resident ? r.total : resident;
  const int64_t lag = lag_of(r.cps, grid);
  if (lag > STAGES - 1) return 1;  // a slice longer than the ring can wait for
  if (reinterpret_cast<uintptr_t>(a.workspace) % alignof(unsigned long long)) return 1;
  const int64_t groups = a.N * a.G;
  unsigned long long* words = static_cast<unsigned long long*>(a.workspace);
  unsigned* arrived = reinterpret_cast<unsigned*>(words + groups);
  float* slots = reinterpret_cast<float*>(arrived + groups);
  gn_ring_clear<<<1, 256, 0, stream>>>(words, arrived, groups);
  if (launch_status()) return refuse();
  // Cooperative: the driver runs the whole grid at once or refuses the
  // launch, which the deadlock argument needs (a CTA that never started would
  // leave the others waiting). If it refuses the pair of attributes, the
  // launch goes without PDL (griddepcontrol.wait is then a no-op, and the
  // stream orders the clear kernel first).
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(BLOCK);
  cfg.dynamicSmemBytes = static_cast<size_t>(RING_BYTES);
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  auto run = [&](int attrs) {
    cfg.numAttrs = attrs;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<const T*>(a.x), static_cast<const TW*>(a.w),
                              static_cast<const TW*>(a.b), static_cast<T*>(a.y), static_cast<TS*>(a.mean),
                              static_cast<TS*>(a.rstd), slots, words, arrived, r, a.C, a.HW, a.G, a.eps,
                              DivU32::of(static_cast<uint32_t>(a.HW)), DivU32::of(static_cast<uint32_t>(r.cps)), lag);
  };
  cudaError_t e = run(PDL ? 2 : 1);
  if (e != cudaSuccess && PDL) {
    cudaGetLastError();
    e = run(1);
  }
  return e == cudaSuccess && !launch_status() ? 0 : refuse();
}

template <class T, class TW, class TS>
int launch(const GnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  const Ring r = ring_of(a);
  // The bulk copy moves whole 16-byte vectors from 16-byte addresses.
  // Chunk ids and slice offsets in 32 bits (multiply-shift divisions).
  if (!aligned16(a.x) || !aligned16(a.y) || r.slice % VW != 0 || r.slice >= (int64_t{1} << 31) ||
      r.total >= (int64_t{1} << 32))
    return 1;
  return a.HW % VW == 0 ? launch_ring<T, TW, TS, true>(a, r, stream) : launch_ring<T, TW, TS, false>(a, r, stream);
}

#include "../_common/group_norm_cuda_entry.cuh"  // argument checks and the entry points: inlined when forge loads the template
