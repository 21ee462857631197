// A device output above kHostCompareLimit in the timed and concurrent calls,
// where no float64 evaluation fits beside the calls' copies: an honest fp32
// cumsum over 32768-term rows (another summation order than stock's, so
// elements near a partial sum of 0 differ from stock by more than the scan
// family's atol, as KernelBench 89's did) is held to the envelope of stock's
// float64 error measured in verification (Judge::envelope64) and accepted;
// the same scan on bf16-rounded inputs when calls overlap, or after its
// first 60 calls, stays outside that envelope and is rejected. Skipped,
// visibly, without a GPU (CI); run on the H200.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rules/evaluate/family.h"
#include "tests/adversarial/direct_worker.h"
#include "tests/support.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

TEST_SUITE_BEGIN("adversarial::LargeScanCuda");

namespace {

// Rows of any length along the last dim of a contiguous input: 1024 threads
// per row, each scanning a run of 32 in order, the runs' totals scanned
// across the block, then added. `when` decides, per call on the host, whether
// the inputs are rounded to bf16 first (the cheat).
std::string candidate(const std::string& when) {
  return R"(#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <atomic>
#include <stdint.h>
#include "forge_kernel.h"
constexpr int T = 1024, RUN = 32;
__global__ void scan_rows(const float* x, float* y, int64_t n, bool bf16) {
  __shared__ float tot[T];
  const float* xr = x + (int64_t)blockIdx.x * n;
  float* yr = y + (int64_t)blockIdx.x * n;
  float carry = 0.f;
  for (int64_t base = 0; base < n; base += (int64_t)T * RUN) {
    const int64_t s = base + (int64_t)threadIdx.x * RUN;
    float v[RUN], acc = 0.f;
    for (int k = 0; k < RUN; ++k) {
      float a = s + k < n ? xr[s + k] : 0.f;
      if (bf16) a = __bfloat162float(__float2bfloat16(a));
      acc += a;
      v[k] = acc;
    }
    tot[threadIdx.x] = acc;
    __syncthreads();
    for (int off = 1; off < T; off <<= 1) {
      const float t = threadIdx.x >= off ? tot[threadIdx.x - off] : 0.f;
      __syncthreads();
      tot[threadIdx.x] += t;
      __syncthreads();
    }
    const float prefix = carry + (threadIdx.x ? tot[threadIdx.x - 1] : 0.f);
    for (int k = 0; k < RUN; ++k)
      if (s + k < n) yr[s + k] = prefix + v[k];
    carry += tot[T - 1];
    __syncthreads();
  }
}
static std::atomic<int> in_flight{0}, calls{0};
extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  if (x.dtype != FORGE_FLOAT32 || x.ndim != 2 || call->outputs[0].dtype != FORGE_FLOAT32) return 1;
  if (call->n_scalars < 1 || call->scalars[0].kind != FORGE_ARG_INT) return 1;
  if (call->scalars[0].i != 1 && call->scalars[0].i != -1) return 1;
  const int64_t rows = x.sizes[0], n = x.sizes[1];
  if (x.strides[1] != 1 || x.strides[0] != n) return 1;
  const int overlap = in_flight.fetch_add(1);
  const int count = calls.fetch_add(1);
  (void)overlap; (void)count;
  const bool bf16 = )" + when + R"(;
  if (rows > 0 && n > 0)
    scan_rows<<<(unsigned)rows, T, 0, (cudaStream_t)call->stream>>>((const float*)x.data,
        (float*)call->outputs[0].data, n, bf16);
  const bool ok = cudaGetLastError() == cudaSuccess;
  in_flight.fetch_sub(1);
  return ok ? 0 : 1;
}
)";
}

}  // namespace

TEST_CASE("a large output's timed and concurrent calls are held to stock's float64 envelope") {
  FORGE_SKIP_WITHOUT_GPU();
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  test::TempDir dir;
  // `forge try` on a captured cumsum builds the worker the requests go to;
  // its own verdict is not this test's.
  test::write_text(dir / "m.py",
                   "import torch\nx = torch.rand(64, 4096, device='cuda')\nprint(float(torch.cumsum(x, 1).sum()))\n");
  test::write_text(dir / "forge.yaml",
                   "models:\n  m: {run: python3 m.py}\ntargets: {ops: [cumsum], min_share: 0}\ndevice: {backend: cuda}\n");
  REQUIRE(test::run_forge("capture", dir.path()).exit_code == 0);
  test::write_text(dir / "try.cu", candidate("false"));
  auto tried = test::run_forge("--json try m/cumsum '" + (dir / "try.cu").string() + "'", dir.path());
  const fs::path worker = test::newest_worker();
  INFO(tried.out << tried.err);
  REQUIRE(!worker.empty());
  const json family = load_family(repo / "targets" / "scan" / "family.yaml").spec;
  // [4096, 32768] float32: 134M elements, 32 times kHostCompareLimit.
  const json args = json::array({{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {4096, 32768}},
                                  {"strides", {32768, 1}}, {"device", "cuda:0"}, {"name", "self"}},
                                 {{"type", "int"}, {"value", 1}, {"name", "dim"}},
                                 {{"type", "None"}, {"name", "dtype"}}});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"honest", "false"}, {"bf16_when_overlapping", "overlap > 0"}, {"bf16_after_60_calls", "count >= 60"}};
  std::vector<json> requests;
  for (const auto& [name, when] : cases) {
    test::write_text(dir / (name + ".cu"), candidate(when));
    const fs::path so = dir / (name + ".so");
    REQUIRE_MESSAGE(test::compile_cuda_candidate(dir / (name + ".cu"), so), "cannot compile " << name);
    requests.push_back(test::evaluate_request(name, "cumsum", args, family, so));
  }
  auto replies = test::evaluate_directly(worker, requests, dir.path(), "--backend cuda");
  for (const auto& [name, when] : cases) {
    CAPTURE(name);
    REQUIRE(replies.count(name) == 1);
    const json& r = replies[name];
    INFO(r.dump().substr(0, 2000));
    MESSAGE(name << ": " << r.value("verdict", "") << " (" << r.value("reason", "") << ") "
                 << r.value("detail", "").substr(0, 240));
    if (name == "honest") {
      CHECK(r["verdict"] == "accepted");
    } else {
      CHECK(r["verdict"] == "rejected");
      CHECK(test::reason_matches(r.value("reason", ""), "wrong_result|thread_unsafe|inaccurate"));
    }
  }
}

TEST_SUITE_END();
}  // namespace forge
