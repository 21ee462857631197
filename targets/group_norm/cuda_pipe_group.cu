/* group_norm, CUDA strategy "pipe_group": one kernel, x read once from HBM.
 * Each (sample, group) slice is cut into chunks of BLOCK*VECS 16-byte vectors.
 * Every chunk gets two jobs: a statistics job (its partial moments to the
 * workspace) and an apply job (normalize it). Blocks take jobs in a fixed
 * order from a ticket counter: the first LEAD_MB of statistics jobs, then a
 * statistics job and an apply job by turns. So an apply job reads its chunk
 * about LEAD_MB after the statistics job read it: from L2, not HBM. HBM moves
 * one read and one write of x, the floor's traffic.
 *
 * The last statistics job of a slice (the slice's arrival counter says which)
 * merges the slice's partials in chunk order (deterministic), writes mean and
 * rstd, and marks the slice ready; an apply job loads its chunk, then waits
 * for its slice's mark. Math: as split_group (group_norm_moments.cuh), then
 * scale = rstd * w[c], bias = fma(-scale, mean, b[c]), y = fma(x, scale, bias),
 * normalizing with mean/rstd as stored in the outputs' dtype like stock.
 * Op: aten::native_group_norm(Tensor input, Tensor? weight, Tensor? bias,
 *     SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (out, mean, rstd).
 * Workspace (forge_workspace_bytes): a ticket and one counter per slice
 * (zeroed by a small kernel before each call), 2 floats per slice, 3 floats
 * per chunk.
 *
 * No deadlock, whatever the hardware's block order: a job waits only for
 * statistics jobs with smaller tickets, which running blocks hold (a block
 * takes its ticket once it runs) and which never wait. Run G's designs
 * (PERF.md) kept chunks in registers while a slice's blocks met, and every
 * block waited for the slowest; here the statistics jobs a waiter needs were
 * handed out LEAD_MB earlier, so the wait is normally already over.
 *
 * Assumptions, checked at run time (nonzero return = the package falls back):
 * as split_group (NCHW-contiguous float32/float16/bfloat16, C % group == 0,
 * weight/bias of the input's dtype or float32, mean/rstd N*G contiguous), a
 * slice below 2^31 elements (strategies.yaml's applies), workspace at least
 * forge_workspace_bytes. A launch failure returns 1.
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
#ifndef FORGE_P_VECS
#define FORGE_P_VECS 8 /* 16-byte vectors per thread, all in flight at once: 4, 8, 16 */
#endif
#ifndef FORGE_P_LEAD_MB
#define FORGE_P_LEAD_MB 16 /* how far statistics run ahead of the apply jobs (at least one slice) */
#endif

#include "../_common/cuda_common.cuh"  // inlined when forge loads the template (docs/STRATEGIES.md)

namespace {

constexpr int BLOCK = FORGE_P_BLOCK;
constexpr int VECS = FORGE_P_VECS;
constexpr int64_t LEAD_BYTES = static_cast<int64_t>(FORGE_P_LEAD_MB) << 20;
static_assert(BLOCK % 32 == 0 && BLOCK >= 64 && BLOCK <= 1024, "FORGE_P_BLOCK: a multiple of 32 in 64..1024");
static_assert(VECS >= 1 && VECS <= 32, "FORGE_P_VECS: 1..32");
static_assert(FORGE_P_LEAD_MB >= 0, "FORGE_P_LEAD_MB: >= 0");

#include "../_common/group_norm_args.h"  // the call's fields: inlined when forge loads the template

#include "../_common/group_norm_moments.cuh"  // Moments, merge, warp_merge: inlined when forge loads the template

// The workspace: [ticket (8 bytes)][a counter per slice (4 bytes)] padded to
// 16 bytes, then {n, mean, M2} per chunk.
struct Plan {
  int64_t slices, split, chunks, lead, chunk_el;
  __host__ __device__ int64_t counter_bytes() const { return ((8 + 4 * slices) + 15) / 16 * 16; }
  __host__ __device__ int64_t bytes() const { return counter_bytes() + 3 * chunks * static_cast<int64_t>(sizeof(float)); }
};

// Job of ticket t: {chunk, statistics?}. Tickets [0, lead) are statistics of
// chunks [0, lead); then statistics of chunk lead + i and apply of chunk i by
// turns; then the remaining applies. lead >= split, so the last statistics job
// of chunk i's slice has a smaller ticket than chunk i's apply job.
__device__ __forceinline__ int64_t job_of(int64_t t, int64_t chunks, int64_t lead, bool& stats) {
  stats = true;
  if (t < lead) return t;
  const int64_t u = t - lead, pairs = chunks - lead;
  if (u < 2 * pairs) {
    stats = (u & 1) == 0;
    return stats ? lead + u / 2 : u / 2;
  }
  stats = false;
  return u - pairs;
}

// The chunk's vectors at j0 + (u * BLOCK + thread) * VW, u < VECS, kept in
// the input's dtype (half the registers of fp32 for 16-bit inputs: more
// blocks per SM); positions at or past j1 read as `fill`. VEC: 16-byte loads
// (HW % VW == 0 and aligned pointers, so a vector never straddles j1 or two
// channels).
template <class T, int VW, bool VEC>
__device__ __forceinline__ void load_chunk(const T* xs, int j0, int j1, T fill, Pack<T, VW> (&v)[VECS]) {
  const int jt = j0 + static_cast<int>(threadIdx.x) * VW;
#pragma unroll
  for (int u = 0; u < VECS; ++u) {
    const int j = jt + u * BLOCK * VW;
    if (VEC) {
      if (j < j1) v[u] = *reinterpret_cast<const Pack<T, VW>*>(xs + jt + u * BLOCK * VW);  // one base, constant offsets
      else
#pragma unroll
        for (int e = 0; e < VW; ++e) v[u].v[e] = fill;
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e) v[u].v[e] = j + e < j1 ? xs[j + e] : fill;
    }
  }
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__global__ void gn_pipe_zero(unsigned* counters, int64_t words) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    counters[i] = 0;
  asm volatile("griddepcontrol.launch_dependents;");
}

__device__ __forceinline__ void add_release(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// A decoded ticket: which chunk, which job, where its slice lies.
struct Job {
  bool valid, stats;
  int64_t id, ng;
  int j0, j1;  // the chunk inside its slice: offsets fit in 32 bits (launch checks)
};
__device__ __forceinline__ Job job_at(unsigned long long t, const Plan& p, int64_t n_el) {
  Job j;
  j.valid = static_cast<int64_t>(t) < 2 * p.chunks;
  j.id = j.valid ? job_of(static_cast<int64_t>(t), p.chunks, p.lead, j.stats) : 0;
  if (!j.valid) j.stats = false;
  j.ng = j.id / p.split;
  j.j0 = static_cast<int>(j.id - j.ng * p.split) * static_cast<int>(p.chunk_el);
  j.j1 = j.j0 + p.chunk_el < n_el ? j.j0 + static_cast<int>(p.chunk_el) : static_cast<int>(n_el);
  return j;
}

// Issues a job's loads; a statistics job fills past j1 with the chunk's
// first element K, which adds 0 to both sums.
template <class T, int VW, bool VEC>
__device__ __forceinline__ void load_job(const T* x, const Job& j, int64_t n_el, T& k_raw, Pack<T, VW> (&v)[VECS]) {
  const T* xs = x + j.ng * n_el;  // slice (n, g) starts at (n*C + g*D)*HW = ng*D*HW
  k_raw = j.stats ? xs[j.j0] : T{};
  load_chunk<T, VW, VEC>(xs, j.j0, j.j1, k_raw, v);
}

// Statistics job: the chunk's partial moments to its slot, then one arrival
// on its slice's counter (a release: the slot is visible before the count).
// Nothing waits for the count here.
template <class T, int VW>
__device__ __forceinline__ void finish_stats(const Job& j, T k_raw, const Pack<T, VW> (&v)[VECS], float* part,
                                             unsigned* arrived, float* scratch) {
  const float K = Io<T>::to(k_raw);
  float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
  for (int u = 0; u < VECS; ++u)
#pragma unroll
    for (int e = 0; e < VW; ++e) {
      const float d = Io<T>::to(v[u].v[e]) - K;
      s1 += d;
      s2 += d * d;
    }
  s1 = block_sum(s1, scratch);
  s2 = block_sum(s2, scratch);
  if (threadIdx.x == 0) {
    const float cnt = static_cast<float>(j.j1 - j.j0);
    float* slot = part + j.id * 3;
    slot[0] = cnt;
    slot[1] = K + s1 / cnt;
    slot[2] = s2 - s1 * s1 / cnt;
    add_release(arrived + j.ng, 1u);
  }
}

// Apply job: waits until all `split` statistics jobs of the slice arrived,
// merges their partials in chunk order (warp_merge: the same bits in every
// block of the slice) and normalizes the chunk. The slice's first chunk
// writes its mean and rstd.
template <class T, class TW, class TS, int VW, bool VEC>
__device__ __forceinline__ void finish_apply(const Job& j, const Pack<T, VW> (&v)[VECS], T* y, const TW* w,
                                             const TW* b, TS* mean_out, TS* rstd_out, const Plan& p, int64_t D,
                                             int64_t G, int64_t n_el, const float* part, const unsigned* arrived,
                                             float eps, DivU32 hw, float* s_stats) {
  if (threadIdx.x < 32) {
    if (threadIdx.x == 0)
      while (load_acquire(arrived + j.ng) != static_cast<unsigned>(p.split)) __nanosleep(64);
    __syncwarp();
    const Moments m = warp_merge(part + j.ng * p.split * 3, p.split);
    if (threadIdx.x == 0) {
      const float var = m.m2 / static_cast<float>(n_el);
      // mean/rstd as stored in the outputs' dtype, as stock normalizes with.
      const TS mean_s = Io<TS>::from(m.mean), rstd_s = Io<TS>::from(rsqrtf(var + eps));
      if (j.j0 == 0) {
        mean_out[j.ng] = mean_s;
        rstd_out[j.ng] = rstd_s;
      }
      s_stats[0] = Io<TS>::to(mean_s);
      s_stats[1] = Io<TS>::to(rstd_s);
    }
  }
  __syncthreads();
  const float mean = s_stats[0], rstd = s_stats[1];
  const int64_t c0 = (j.ng % G) * D;
  T* ys = y + j.ng * n_el;
  const int jt = j.j0 + static_cast<int>(threadIdx.x) * VW;
#pragma unroll
  for (int u = 0; u < VECS; ++u) {
    const int jv = jt + u * BLOCK * VW;
    if (VEC) {
      if (jv >= j.j1) break;
      const int64_t c = c0 + hw.div(static_cast<uint32_t>(jv));
      const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
      const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
      float o[VW];
#pragma unroll
      for (int e = 0; e < VW; ++e) o[e] = fmaf(Io<T>::to(v[u].v[e]), scale, bias);
      store_n<T, VW, true>(ys + jt + u * BLOCK * VW, o);  // one base, constant offsets
    } else {
#pragma unroll
      for (int e = 0; e < VW; ++e) {
        if (jv + e >= j.j1) break;
        const int64_t c = c0 + hw.div(static_cast<uint32_t>(jv + e));
        const float scale = w ? rstd * Io<TW>::to(w[c]) : rstd;
        const float bias = fmaf(-scale, mean, b ? Io<TW>::to(b[c]) : 0.0f);
        ys[jv + e] = Io<T>::from(fmaf(Io<T>::to(v[u].v[e]), scale, bias));
      }
    }
  }
}

// A resident grid: each block takes jobs from the ticket counter until none
// is left. Two jobs in flight per block: the next job's loads are issued
// before the current one's reduction or wait, so a block keeps HBM busy
// through its own latencies; tickets are asked for one job further ahead.
template <class T, class TW, class TS, int VW, bool VEC>
__global__ void __launch_bounds__(BLOCK)
    gn_pipe(const T* __restrict__ x, const TW* __restrict__ w, const TW* __restrict__ b, T* __restrict__ y,
            TS* __restrict__ mean_out, TS* __restrict__ rstd_out, char* __restrict__ ws, Plan p, int64_t C,
            int64_t HW, int64_t G, float eps, DivU32 hw) {
  __shared__ unsigned long long s_ticket[3];  // a ring: current, next, and the one being asked for
  __shared__ float scratch[32];
  __shared__ float s_stats[2];
  // A programmatic dependent launch: gn_pipe_zero's counters are visible after this.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned long long* ticket = reinterpret_cast<unsigned long long*>(ws);
  unsigned* arrived = reinterpret_cast<unsigned*>(ws + 8);
  float* part = reinterpret_cast<float*>(ws + p.counter_bytes());
  const int64_t D = C / G, n_el = D * HW;
  if (threadIdx.x == 0) {
    s_ticket[0] = atomicAdd(ticket, 1ull);
    s_ticket[1] = atomicAdd(ticket, 1ull);
  }
  __syncthreads();
  Pack<T, VW> va[VECS], vb[VECS];
  T ka, kb;
  Job cur = job_at(s_ticket[0], p, n_el);
  if (cur.valid) load_job<T, VW, VEC>(x, cur, n_el, ka, va);
  // Unrolled by two so each register buffer has a fixed name.
  for (int it = 0;; it += 2) {
    Job nxt = job_at(s_ticket[(it + 1) % 3], p, n_el);
    if (!cur.valid) break;
    if (threadIdx.x == 0) s_ticket[(it + 2) % 3] = atomicAdd(ticket, 1ull);  // read after the next barrier
    if (nxt.valid) load_job<T, VW, VEC>(x, nxt, n_el, kb, vb);
    if (cur.stats) finish_stats<T, VW>(cur, ka, va, part, arrived, scratch);
    else finish_apply<T, TW, TS, VW, VEC>(cur, va, y, w, b, mean_out, rstd_out, p, D, G, n_el, part, arrived, eps, hw, s_stats);
    __syncthreads();  // the ticket is in; scratch and s_stats are free again
    cur = job_at(s_ticket[(it + 2) % 3], p, n_el);
    if (!nxt.valid) break;
    if (threadIdx.x == 0) s_ticket[it % 3] = atomicAdd(ticket, 1ull);
    if (cur.valid) load_job<T, VW, VEC>(x, cur, n_el, ka, va);
    if (nxt.stats) finish_stats<T, VW>(nxt, kb, vb, part, arrived, scratch);
    else finish_apply<T, TW, TS, VW, VEC>(nxt, vb, y, w, b, mean_out, rstd_out, p, D, G, n_el, part, arrived, eps, hw, s_stats);
    __syncthreads();
  }
}

template <class T>
Plan plan_of(const GnArgs& a) {
  constexpr int64_t VW = 16 / sizeof(T);
  Plan p;
  p.slices = a.N * a.G;
  p.chunk_el = static_cast<int64_t>(BLOCK) * VECS * VW;
  const int64_t n_el = a.C / a.G * a.HW;
  p.split = (n_el + p.chunk_el - 1) / p.chunk_el;
  p.chunks = p.slices * p.split;
  const int64_t by_bytes = LEAD_BYTES / (p.chunk_el * static_cast<int64_t>(sizeof(T)));
  p.lead = by_bytes > p.split ? by_bytes : p.split;
  if (p.lead > p.chunks) p.lead = p.chunks;
  return p;
}

inline int64_t workspace_needed(const GnArgs& a) {
  int64_t bytes = 0;
  with_dtype(a.x_dtype, [&](auto t) {
    bytes = plan_of<decltype(t)>(a).bytes();
    return 0;
  });
  return bytes;
}

template <class T, class TW, class TS>
int launch(const GnArgs& a, cudaStream_t stream) {
  constexpr int VW = 16 / sizeof(T);
  const Plan p = plan_of<T>(a);
  if (2 * p.chunks >= 0x7fffffffLL || a.C / a.G * a.HW >= 0x7fffffffLL) return 1;
  const bool vec = aligned16(a.x) && aligned16(a.y) && a.HW % VW == 0;
  char* ws = static_cast<char*>(a.workspace);
  const int64_t words = p.counter_bytes() / 4;
  gn_pipe_zero<<<static_cast<unsigned>((words + 255) / 256 < 1024 ? (words + 255) / 256 : 1024), 256, 0, stream>>>(
      reinterpret_cast<unsigned*>(ws), words);
  if (launch_status()) return 1;
  auto run = [&](auto kernel) {
    // As many blocks as fit on the GPU at once (asked once per instance).
    static const int64_t resident = [&] {
      int dev = 0, sms = 0, per_sm = 0;
      if (cudaGetDevice(&dev) != cudaSuccess ||
          cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, BLOCK, 0) != cudaSuccess)
        return int64_t{0};
      return static_cast<int64_t>(sms) * per_sm;
    }();
    if (resident < 1) return cudaErrorInvalidConfiguration;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(2 * p.chunks < resident ? 2 * p.chunks : resident));
    cfg.blockDim = dim3(BLOCK);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<const T*>(a.x), static_cast<const TW*>(a.w),
                              static_cast<const TW*>(a.b), static_cast<T*>(a.y), static_cast<TS*>(a.mean),
                              static_cast<TS*>(a.rstd), ws, p, a.C, a.HW, a.G, a.eps,
                              DivU32::of(static_cast<uint32_t>(a.HW)));
  };
  const cudaError_t e = vec ? run(gn_pipe<T, TW, TS, VW, true>) : run(gn_pipe<T, TW, TS, VW, false>);
  return e == cudaSuccess && !launch_status() ? 0 : 1;
}

#include "../_common/group_norm_cuda_entry.cuh"  // argument checks and the entry points: inlined when forge loads the template
