// The fastest a kernel can move the campaign targets' bytes on this GPU, timed
// the way every per-target figure in docs/PERF.md is (template_probe.py, the
// worker): 256 MB written before each rep to flush L2, CUDA events around one
// call, median of REPS. Issue 10's floor is bytes / 4.28 TB/s with no per-call
// cost; this says how close any kernel gets to it at each size:
//   - empty: a kernel that does nothing (the per-call cost, events included);
//   - memcpy: cudaMemcpyAsync device to device;
//   - copy U B: our 16-byte copy, U vectors in flight per thread, B blocks per
//     SM looping (0: one thread per U vectors, no loop);
//   - bulk S: Hopper's bulk copies (cp.async.bulk, TMA without a tensor map)
//     through S shared-memory stages of 32 KB, one block per SM;
//   - read U: the read-only half (reductions: the pool, the means), summed.
// Sizes: the tensor bytes of the campaign's targets (a copy moves twice that).
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/gpu/copy_ceiling.cu -o /tmp/copy_ceiling
//   /tmp/copy_ceiling [out.json]      # on the GPU machine; prints a table last
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace {

constexpr int REPS = 60;
constexpr int BULK_BYTES = 32 * 1024;

__global__ void empty_kernel() {}

template <int U>
__global__ void __launch_bounds__(256) copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride * U) {
    int4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u * stride < n) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u * stride < n) dst[i + u * stride] = v[u];
  }
}

template <int U>
__global__ void __launch_bounds__(256) read_kernel(const int4* __restrict__ src, int64_t n, unsigned* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned acc = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride * U) {
    int4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u * stride < n) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (i + u * stride < n) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;  // keeps the loads; practically never stores
}

// One thread per block drives S stages: bulk load of 32 KB into a stage
// (completion counted on the stage's mbarrier), then a bulk store from it.
// A stage is reloaded only after its store has read it (wait_group.read).
template <int S>
__global__ void bulk_kernel(const char* __restrict__ src, char* __restrict__ dst, int64_t bytes) {
  extern __shared__ __align__(128) char smem[];
  __shared__ __align__(8) unsigned long long bar[S];
  if (threadIdx.x != 0) return;
  const int64_t chunks = bytes / BULK_BYTES;  // sizes are whole chunks (main checks)
  for (int s = 0; s < S; ++s)
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(&bar[s]))));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  auto load = [&](int64_t c, int s) {
    const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&bar[s]));
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(smem + s * BULK_BYTES));
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(b), "r"(BULK_BYTES) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(d),
                 "l"(src + c * BULK_BYTES), "r"(BULK_BYTES), "r"(b)
                 : "memory");
  };
  int64_t first = blockIdx.x, step = gridDim.x;
  for (int s = 0; s < S && first + s * step < chunks; ++s) load(first + s * step, s);
  unsigned phase = 0;
  for (int64_t k = 0;; ++k) {
    const int64_t c = first + k * step;
    if (c >= chunks) break;
    const int s = static_cast<int>(k % S);
    const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(&bar[s]));
    const unsigned par = (phase >> s) & 1u;
    asm volatile(
        "{ .reg .pred p; W: mbarrier.try_wait.parity.shared.b64 p, [%0], %1; @!p bra W; }" ::"r"(b), "r"(par)
        : "memory");
    phase ^= 1u << s;
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(smem + s * BULK_BYTES));
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + c * BULK_BYTES), "r"(d),
                 "r"(BULK_BYTES)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    const int64_t next = c + S * step;
    if (next < chunks) {
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");  // stage s is free again
      load(next, s);
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

struct Result {
  std::string name;
  double us;
};

double median_us(const std::function<void()>& call, void* flush, size_t flush_bytes) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r < REPS; ++r) {
    cudaMemsetAsync(flush, r & 0xff, flush_bytes);
    cudaEventRecord(a);
    call();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1000.0f);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return std::printf("no CUDA device\n"), 1;
  const int sms = prop.multiProcessorCount;
  // MB of one tensor: a target's input (its output is the same size, except
  // for the reductions, whose row is "read").
  const std::vector<std::pair<const char*, double>> sizes = {
      {"mean [2,1024,1536] f32", 12.58},  {"bn/pool [64,2048,7,7] bf16", 12.85},
      {"gn [1,512,128,128] bf16", 16.78}, {"gn [1,256,256,256] bf16", 33.55},
      {"bn [64,512,28,28] bf16", 51.38},  {"softmax [2,8,1024,1024] f32", 67.11},
      {"bn [64,256,56,56] bf16", 102.76}, {"softmax [2,16,1024,1024] f32", 134.22},
      {"1 GiB", 1073.74}};
  const size_t flush_bytes = 256u << 20, max_bytes = 1u << 30;
  void *flush, *src, *dst;
  unsigned* sink;
  if (cudaMalloc(&flush, flush_bytes) || cudaMalloc(&src, max_bytes) || cudaMalloc(&dst, max_bytes) ||
      cudaMalloc(&sink, 4))
    return std::printf("cudaMalloc failed\n"), 1;
  cudaMemset(src, 1, max_bytes);
  cudaFuncSetAttribute(bulk_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * BULK_BYTES);
  cudaFuncSetAttribute(bulk_kernel<6>, cudaFuncAttributeMaxDynamicSharedMemorySize, 6 * BULK_BYTES);
  FILE* json = argc > 1 ? std::fopen(argv[1], "w") : nullptr;
  if (json) std::fprintf(json, "{\"gpu\": \"%s\", \"reps\": %d, \"rows\": [\n", prop.name, REPS);
  std::string table;
  for (size_t si = 0; si < sizes.size(); ++si) {
    const auto& [label, mb] = sizes[si];
    const int64_t bytes = static_cast<int64_t>(mb * 1e6) / BULK_BYTES * BULK_BYTES;
    const int64_t n = bytes / 16;
    const int4* s4 = static_cast<const int4*>(src);
    int4* d4 = static_cast<int4*>(dst);
    std::vector<Result> rs;
    auto add = [&](const std::string& name, const std::function<void()>& f) {
      f();  // warm-up (and a launch error shows as a figure of ~0)
      rs.push_back({name, median_us(f, flush, flush_bytes)});
    };
    add("empty", [&] { empty_kernel<<<1, 32>>>(); });
    add("memcpy", [&] { cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice); });
    auto grid = [&](int per_sm, int u) {
      return per_sm ? sms * per_sm : static_cast<int>((n + 256LL * u - 1) / (256LL * u));
    };
    for (int per_sm : {0, 8, 4})
      for (int u : {1, 2, 4, 8}) {
        const int g = grid(per_sm, u);
        const std::string name = "copy " + std::to_string(u) + " " + std::to_string(per_sm);
        if (u == 1) add(name, [&] { copy_kernel<1><<<g, 256>>>(s4, d4, n); });
        if (u == 2) add(name, [&] { copy_kernel<2><<<g, 256>>>(s4, d4, n); });
        if (u == 4) add(name, [&] { copy_kernel<4><<<g, 256>>>(s4, d4, n); });
        if (u == 8) add(name, [&] { copy_kernel<8><<<g, 256>>>(s4, d4, n); });
      }
    add("bulk 4", [&] { bulk_kernel<4><<<sms, 32, 4 * BULK_BYTES>>>(static_cast<const char*>(src), static_cast<char*>(dst), bytes); });
    add("bulk 6", [&] { bulk_kernel<6><<<sms, 32, 6 * BULK_BYTES>>>(static_cast<const char*>(src), static_cast<char*>(dst), bytes); });
    for (int u : {2, 4, 8}) {
      const int g = grid(8, u);
      const std::string name = "read " + std::to_string(u);
      if (u == 2) add(name, [&] { read_kernel<2><<<g, 256>>>(s4, n, sink); });
      if (u == 4) add(name, [&] { read_kernel<4><<<g, 256>>>(s4, n, sink); });
      if (u == 8) add(name, [&] { read_kernel<8><<<g, 256>>>(s4, n, sink); });
    }
    if (cudaDeviceSynchronize() != cudaSuccess || cudaGetLastError() != cudaSuccess)
      return std::printf("%s: a kernel failed: %s\n", label, cudaGetErrorString(cudaGetLastError())), 1;
    // Bulk copies checked: the destination must equal the source (cleared first).
    cudaMemset(dst, 0, bytes);
    bulk_kernel<4><<<sms, 32, 4 * BULK_BYTES>>>(static_cast<const char*>(src), static_cast<char*>(dst), bytes);
    std::vector<unsigned char> h(4096);
    cudaMemcpy(h.data(), static_cast<char*>(dst) + bytes - 4096, 4096, cudaMemcpyDeviceToHost);
    const bool bulk_ok = std::all_of(h.begin(), h.end(), [](unsigned char c) { return c == 1; });
    const double floor_copy = 2.0 * bytes / 4.28e12 * 1e6, floor_read = bytes / 4.28e12 * 1e6;
    double best_copy = 1e30, best_read = 1e30;
    std::string best_copy_name, best_read_name;
    for (const auto& r : rs) {
      const bool is_read = r.name.rfind("read", 0) == 0;
      if (r.name == "empty") continue;
      if (is_read && r.us < best_read) best_read = r.us, best_read_name = r.name;
      if (!is_read && r.us < best_copy) best_copy = r.us, best_copy_name = r.name;
    }
    std::printf("== %s (%.2f MB)%s\n", label, bytes / 1e6, bulk_ok ? "" : "  BULK COPY WRONG");
    for (const auto& r : rs) std::printf("  %-12s %8.1f us\n", r.name.c_str(), r.us);
    char line[256];
    std::snprintf(line, sizeof line, "%-30s %8.2f %6.1f %8.1f %8.1f %-12s %6.1f %8.1f %-8s %6.1f\n", label,
                  bytes / 1e6, rs[0].us, rs[1].us, best_copy, best_copy_name.c_str(), 100 * floor_copy / best_copy,
                  best_read, best_read_name.c_str(), 100 * floor_read / best_read);
    table += line;
    if (json) {
      std::fprintf(json, "  {\"label\": \"%s\", \"bytes\": %lld, \"bulk_ok\": %s, \"us\": {", label,
                   static_cast<long long>(bytes), bulk_ok ? "true" : "false");
      for (size_t i = 0; i < rs.size(); ++i)
        std::fprintf(json, "%s\"%s\": %.2f", i ? ", " : "", rs[i].name.c_str(), rs[i].us);
      std::fprintf(json, "}}%s\n", si + 1 < sizes.size() ? "," : "");
    }
  }
  if (json) std::fprintf(json, "]}\n"), std::fclose(json);
  std::printf("\n%s, %d SMs; median of %d, L2 flushed before each; floor = bytes / 4.28 TB/s\n", prop.name, sms, REPS);
  std::printf("%-30s %8s %6s %8s %8s %-12s %6s %8s %-8s %6s\n", "tensor", "MB", "empty", "memcpy", "copy us", "best",
              "floor%", "read us", "best", "floor%");
  std::printf("%s", table.c_str());
  return 0;
}
