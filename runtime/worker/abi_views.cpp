// The worker's ABI views (abi_views.h): guarded buffers from the exchange
// arena, the forge_tensor/forge_scalar views, and poison.
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include "abi_views.h"

#include <algorithm>
#include <cstring>

#include "arena.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <limits>

#include "op_args_detail.h"

namespace forge::worker {
namespace {

using detail::bad;
using detail::bits;
using detail::distinct_view;
using detail::dtype_text;
using detail::extent_bytes;

// The guard byte: drawn per evaluation (set_guard_byte), so a kernel cannot
// recognise a guarded buffer by a constant pattern.
uint8_t g_canary = 0xA5;
Arena* g_arena = nullptr;

void release_to_arena(void* ctx) { static_cast<Arena*>(ctx)->release(); }

// n bytes as a uint8 tensor: from the exchange arena when one is set.
at::Tensor byte_buffer(int64_t n, c10::Device device) {
  if (device.is_cuda() && !device.has_index())  // "cuda": the current device, as torch resolves it
    device = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getDevice();
  auto opts = at::TensorOptions().dtype(at::kByte).device(device);
  // A CPU tensor beside CUDA ones (a Python number) stays in host memory: the
  // CUDA arena is device memory (Session carries its bytes to the runner).
  if (!g_arena || g_arena->cuda() != device.is_cuda()) return at::empty({n}, opts);
  void* p = g_arena->allocate(std::max<int64_t>(n, 1));
  if (!p) throw ArenaFull(n);
  c10::Storage st(c10::Storage::use_byte_size_t(), n, c10::DataPtr(p, g_arena, &release_to_arena, device), nullptr,
                  false);
  at::Tensor t = at::empty({0}, opts);
  t.set_(st, 0, {n}, {1});
  return t;
}

}  // namespace

Buffer alloc_tensor(at::IntArrayRef sizes, at::IntArrayRef strides, c10::ScalarType dtype, c10::Device device,
                    bool guarded, int64_t guard_bytes, int64_t shift_elems) {
  Buffer b;
  auto opts = at::TensorOptions().dtype(dtype).device(device);
  int64_t elem = static_cast<int64_t>(c10::elementSize(dtype));
  if (!guarded) {
    b.extent = extent_bytes(sizes, strides, elem);
    if (!g_arena) {
      b.t = at::empty_strided(sizes, strides, opts);
      return b;
    }
    at::Tensor bytes = byte_buffer((b.extent + elem - 1) / elem * elem, device);
    b.t = at::empty({0}, opts);
    b.t.set_(bytes.storage(), 0, sizes, strides);
    return b;
  }
  for (int64_t s : strides)
    if (s < 0) bad("negative strides are not supported");
  b.extent = extent_bytes(sizes, strides, elem);
  b.pad = std::max<int64_t>(guard_bytes, kGuardBytes) / kGuardBytes * kGuardBytes;  // keeps alignment
  int64_t body = (b.extent + elem - 1) / elem * elem + shift_elems * elem;
  b.base = byte_buffer(b.pad + body + b.pad, device);
  b.base.fill_(g_canary);
  b.t = at::empty({0}, opts);
  b.t.set_(b.base.storage(), b.pad / elem + shift_elems, sizes, strides);
  b.shift = shift_elems * elem;
  return b;
}

void set_exchange_arena(Arena* arena) { g_arena = arena; }
void set_guard_byte(uint8_t byte) { g_canary = byte; }

Buffer clone_buffer(const Buffer& src, bool guarded, int64_t guard_bytes) {
  const int64_t elem = static_cast<int64_t>(src.t.element_size());
  Buffer b = alloc_tensor(src.t.sizes(), src.t.strides(), src.t.scalar_type(), src.t.device(), guarded || src.shift > 0,
                          guard_bytes, src.shift / elem);
  distinct_view(b.t).copy_(distinct_view(src.t));
  return b;
}

std::optional<int64_t> damaged_guard(const Buffer& b) {
  if (!b.base.defined()) return std::nullopt;
  const int64_t start = b.pad + b.shift;  // the tensor's first byte in base
  at::Tensor head = b.base.narrow(0, 0, start);
  int64_t tail_start = b.base.numel() - b.pad;
  at::Tensor tail = b.base.narrow(0, tail_start, b.pad);
  at::Tensor bad_head = head.ne(g_canary);
  if (bad_head.any().item<bool>()) {
    int64_t first = bad_head.nonzero().select(1, 0).min().item<int64_t>();
    return first - start;  // negative: before the tensor
  }
  at::Tensor bad_tail = tail.ne(g_canary);
  if (bad_tail.any().item<bool>()) {
    int64_t first = bad_tail.nonzero().select(1, 0).min().item<int64_t>();
    return tail_start + first - start;  // bytes from the tensor's first byte
  }
  return std::nullopt;
}

int32_t forge_dtype(c10::ScalarType t) { return dtypes::abi_code(t); }

forge_tensor forge_view(const at::Tensor& t) {
  forge_tensor f{};
  if (!t.defined()) {
    f.data = nullptr;
    f.ndim = -1;
    f.dtype = -1;
    return f;
  }
  f.data = t.data_ptr();
  f.ndim = static_cast<int32_t>(t.dim());
  f.dtype = forge_dtype(t.scalar_type());
  for (int64_t d = 0; d < t.dim() && d < FORGE_MAX_DIMS; ++d) {
    f.sizes[d] = t.size(d);
    f.strides[d] = t.stride(d);
  }
  return f;
}

std::vector<forge_scalar> forge_scalars(const std::vector<ArgSpec>& specs) {
  std::vector<forge_scalar> out;
  for (const auto& a : specs) {
    if (a.schema_tensor) continue;
    forge_scalar s{};
    switch (a.kind) {
      case ArgKind::None: s.kind = FORGE_ARG_NONE; break;
      case ArgKind::Int: s.kind = FORGE_ARG_INT, s.i = a.i; break;
      case ArgKind::Float: s.kind = FORGE_ARG_FLOAT, s.f = a.f; break;
      case ArgKind::Bool: s.kind = FORGE_ARG_BOOL, s.i = a.i; break;
      case ArgKind::Dtype: s.kind = FORGE_ARG_DTYPE, s.i = forge_dtype(static_cast<c10::ScalarType>(a.i)); break;
      case ArgKind::IntList:
        s.kind = FORGE_ARG_INT_LIST;
        s.len = static_cast<int32_t>(a.ints.size());
        for (size_t k = 0; k < a.ints.size() && k < FORGE_MAX_LIST; ++k) s.ints[k] = a.ints[k];
        break;
      case ArgKind::Str:
        s.kind = FORGE_ARG_STRING;
        s.len = static_cast<int32_t>(std::min<size_t>(a.text.size(), FORGE_MAX_STRING));
        std::memcpy(s.ints, a.text.data(), static_cast<size_t>(s.len));  // s{} zeroed the NUL
        break;
      default: s.kind = FORGE_ARG_NONE; break;  // excluded earlier by abi_problem
    }
    out.push_back(s);
  }
  return out;
}

std::string abi_problem_of_outputs(const std::vector<at::Tensor>& outs) {
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!outs[k].defined()) continue;
    if (forge_dtype(outs[k].scalar_type()) < 0)
      return "output " + std::to_string(k) + " has dtype " + dtype_text(outs[k].scalar_type()) +
             ", not in the candidate ABI";
    if (outs[k].dim() > FORGE_MAX_DIMS)
      return "output " + std::to_string(k) + " has " + std::to_string(outs[k].dim()) + " dims";
  }
  return {};
}

int64_t tensor_bytes(const at::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

void poison(const at::Tensor& t, uint64_t pattern) {
  if (!t.defined() || t.numel() == 0) return;
  at::Tensor v = distinct_view(t);
  const uint8_t byte = static_cast<uint8_t>(0x40 | ((pattern >> 8) & 0x3F));  // never 0: a zeroed output stays wrong
  if (!at::isFloatingType(v.scalar_type())) {
    // Integers and bool: a repeated byte (bool gets an invalid one, never a real result).
    bits(v).fill_(v.scalar_type() == c10::ScalarType::Bool ? 0x5A : byte);
    return;
  }
  switch (pattern % 4) {
    case 0: v.fill_(std::numeric_limits<double>::quiet_NaN()); break;
    case 1: v.fill_(((pattern >> 2) & 1 ? -1.0 : 1.0) * (1000.0 + static_cast<double>((pattern >> 16) % 100000) / 7.0)); break;
    case 2: v.fill_((pattern >> 3) & 1 ? std::numeric_limits<double>::infinity()
                                        : -std::numeric_limits<double>::infinity()); break;
    default: bits(v).fill_(byte); break;
  }
}

void poison(const at::Tensor& t) { poison(t, 0); }
}  // namespace forge::worker
