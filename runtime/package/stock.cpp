#include "stock.h"

#include <ATen/ATen.h>
#include <ATen/ops/_softmax_cpu_dispatch.h>
#include <ATen/ops/mean_cpu_dispatch.h>
#include <ATen/ops/native_batch_norm_cpu_dispatch.h>
#include <ATen/ops/native_group_norm_cpu_dispatch.h>
#include <ATen/ops/native_layer_norm_cpu_dispatch.h>
#ifdef FORGE_PACKAGE_CUDA
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <ATen/ops/mean_cuda_dispatch.h>
#include <ATen/ops/native_batch_norm_cuda_dispatch.h>
#include <ATen/ops/native_group_norm_cuda_dispatch.h>
#include <ATen/ops/native_layer_norm_cuda_dispatch.h>
#if __has_include(<ATen/ops/_fused_rms_norm_cuda_dispatch.h>)
#include <ATen/ops/_fused_rms_norm_cuda_dispatch.h>
#define FORGE_HAVE_RMS_NORM_CUDA 1
#endif
#endif

#include <tuple>

namespace forge::package {
namespace {

using Args = std::vector<c10::IValue>;
using Out = std::vector<c10::IValue>;

std::optional<at::Tensor> opt_tensor(const c10::IValue& v) {
  return v.isNone() ? std::nullopt : std::optional<at::Tensor>(v.toTensor());
}
std::optional<at::ScalarType> opt_dtype(const c10::IValue& v) {
  return v.isNone() ? std::nullopt : std::optional<at::ScalarType>(v.toScalarType());
}
template <class Tuple, size_t... I>
Out unpack(const Tuple& t, std::index_sequence<I...>) {
  return {c10::IValue(std::get<I>(t))...};
}
template <class... T>
Out unpack(const std::tuple<T...>& t) {
  return unpack(t, std::index_sequence_for<T...>{});
}

// One adapter per op and backend; NS is at::cpu or at::cuda.
#define FORGE_STOCK_ADAPTERS(NS)                                                                   \
  Out softmax_##NS(const Args& a) {                                                                \
    return {at::NS::_softmax(a[0].toTensor(), a[1].toInt(), a[2].toBool())};                       \
  }                                                                                                \
  Out layer_norm_##NS(const Args& a) {                                                             \
    return unpack(at::NS::native_layer_norm_symint(a[0].toTensor(), a[1].toSymIntVector(),         \
                                                   opt_tensor(a[2]), opt_tensor(a[3]),             \
                                                   a[4].toDouble()));                              \
  }                                                                                                \
  Out group_norm_##NS(const Args& a) {                                                             \
    return unpack(at::NS::native_group_norm_symint(a[0].toTensor(), opt_tensor(a[1]),              \
                                                   opt_tensor(a[2]), a[3].toSymInt(),              \
                                                   a[4].toSymInt(), a[5].toSymInt(),               \
                                                   a[6].toInt(), a[7].toDouble()));                \
  }                                                                                                \
  Out mean_dim_##NS(const Args& a) {                                                               \
    at::OptionalIntArrayRef dim;                                                                   \
    std::vector<int64_t> dims;                                                                     \
    if (!a[1].isNone()) dims = a[1].toIntVector(), dim = dims;                                     \
    return {at::NS::mean(a[0].toTensor(), dim, a[2].toBool(), opt_dtype(a[3]))};                   \
  }                                                                                                \
  Out batch_norm_##NS(const Args& a) {                                                             \
    return unpack(at::NS::native_batch_norm(a[0].toTensor(), opt_tensor(a[1]), opt_tensor(a[2]),   \
                                            opt_tensor(a[3]), opt_tensor(a[4]), a[5].toBool(),     \
                                            a[6].toDouble(), a[7].toDouble()));                    \
  }

FORGE_STOCK_ADAPTERS(cpu)
#ifdef FORGE_PACKAGE_CUDA
FORGE_STOCK_ADAPTERS(cuda)
#ifdef FORGE_HAVE_RMS_NORM_CUDA
Out rms_norm_cuda(const Args& a) {
  std::optional<double> eps = a[3].isNone() ? std::nullopt : std::optional<double>(a[3].toDouble());
  return unpack(at::cuda::_fused_rms_norm(a[0].toTensor(), a[1].toIntVector(), opt_tensor(a[2]), eps));
}
#endif
#endif

}  // namespace

StockFn stock_kernel(const std::string& op, bool cuda) {
  struct Entry {
    const char* op;
    StockFn cpu;
    StockFn cuda;
  };
#ifdef FORGE_PACKAGE_CUDA
#define FORGE_CUDA(f) f
#else
#define FORGE_CUDA(f) nullptr
#endif
  static const Entry table[] = {
      {"aten::_softmax", softmax_cpu, FORGE_CUDA(softmax_cuda)},
      {"aten::native_layer_norm", layer_norm_cpu, FORGE_CUDA(layer_norm_cuda)},
      {"aten::native_group_norm", group_norm_cpu, FORGE_CUDA(group_norm_cuda)},
      {"aten::mean.dim", mean_dim_cpu, FORGE_CUDA(mean_dim_cuda)},
      {"aten::native_batch_norm", batch_norm_cpu, FORGE_CUDA(batch_norm_cuda)},
#ifdef FORGE_HAVE_RMS_NORM_CUDA
      // CPU: _fused_rms_norm is a composite there (no CPU kernel to replace).
      {"aten::_fused_rms_norm", nullptr, rms_norm_cuda},
#endif
  };
  for (const auto& e : table)
    if (op == e.op) return cuda ? e.cuda : e.cpu;
  return nullptr;
}

}  // namespace forge::package
