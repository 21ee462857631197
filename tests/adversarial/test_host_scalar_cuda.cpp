// A CUDA op whose argument is a Python number (x * 0.5 records a 0-dim
// float64 CPU tensor) reaches the runner: the CUDA exchange arena is device
// memory, so the judge keeps the number in host memory and its bytes travel
// in the request (runner_protocol.h, kHostInline). An honest candidate that
// reads it on the host is accepted; one that writes it is rejected like any
// candidate changing its call. Skipped, visibly, without a GPU (CI); run on
// the H200.
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

TEST_SUITE_BEGIN("adversarial::HostScalarCuda");

namespace {

// y = x * s, s read from call->inputs[1] on the host; `write` also changes s.
std::string candidate(bool write) {
  return std::string(R"(#include <cuda_runtime.h>
#include <stdint.h>
#include "forge_kernel.h"
__global__ void scale(const float* x, float* y, float s, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * s;
}
extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& s = call->inputs[1];
  cudaPointerAttributes attr;
  if (s.dtype != FORGE_FLOAT64 || cudaPointerGetAttributes(&attr, s.data) != cudaSuccess) return 1;
  if (attr.type != cudaMemoryTypeUnregistered && attr.type != cudaMemoryTypeHost) return 1;
  const float v = (float)*(const double*)s.data;
)") + (write ? "  *(double*)s.data = 0.0;\n" : "") + R"(  int64_t n = x.sizes[0];
  scale<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)call->stream>>>((const float*)x.data,
      (float*)call->outputs[0].data, v, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
)";
}

}  // namespace

TEST_CASE("a Python number beside CUDA tensors reaches the candidate in host memory, and may not be written") {
  FORGE_SKIP_WITHOUT_GPU();
  const fs::path repo = fs::path(FORGE_TEST_DIR).parent_path();
  test::TempDir dir;
  // `forge try` on the captured multiply builds the worker this test sends its
  // requests to (a capture alone builds only the capture library); its own
  // verdict is not this test's.
  test::write_text(dir / "m.py", "import torch\nx = torch.randn(4096, device='cuda')\nprint(float((x * 0.5).sum()))\n");
  test::write_text(dir / "forge.yaml", "models:\n  m: {run: python3 m.py}\ntargets: {min_share: 0}\ndevice: {backend: cuda}\n");
  REQUIRE(test::run_forge("capture", dir.path()).exit_code == 0);
  test::write_text(dir / "try.cu", candidate(false));
  auto tried = test::run_forge("--json try m/mul.Tensor '" + (dir / "try.cu").string() + "'", dir.path());
  const fs::path worker = test::newest_worker();
  INFO(tried.out << tried.err);
  REQUIRE(!worker.empty());
  const json family = load_family(repo / "targets" / "pointwise" / "family.yaml").spec;
  const json args = json::array({{{"type", "Tensor"}, {"dtype", "float32"}, {"sizes", {4096}}, {"strides", {1}},
                                  {"device", "cuda:0"}, {"name", "self"}},
                                 {{"type", "Tensor"}, {"dtype", "float64"}, {"sizes", json::array()},
                                  {"strides", json::array()}, {"device", "cpu"}, {"name", "other"}}});
  std::vector<json> requests;
  for (const auto& [name, write] : {std::pair{"reads", false}, std::pair{"writes", true}}) {
    test::write_text(dir / (std::string(name) + ".cu"), candidate(write));
    const fs::path so = dir / (std::string(name) + ".so");
    REQUIRE_MESSAGE(test::compile_cuda_candidate(dir / (std::string(name) + ".cu"), so), "cannot compile " << name);
    json r = test::evaluate_request(name, "mul", args, family, so);
    r["overload"] = "Tensor";  // the worker names an op by name and overload apart
    requests.push_back(std::move(r));
  }
  auto replies = test::evaluate_directly(worker, requests, dir.path(), "--backend cuda");
  REQUIRE(replies.count("reads") == 1);
  REQUIRE(replies.count("writes") == 1);
  INFO(replies["reads"].dump().substr(0, 1500));
  INFO(replies["writes"].dump().substr(0, 1500));
  CHECK(replies["reads"]["verdict"] == "accepted");
  CHECK(replies["writes"]["verdict"] == "rejected");
  CHECK(replies["writes"]["reason"] == "abi_mismatch");
  CHECK(replies["writes"].value("detail", "").find("host value") != std::string::npos);
}

TEST_SUITE_END();
}  // namespace forge
