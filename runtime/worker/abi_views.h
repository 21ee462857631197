// The worker's ABI views: the op's tensors and scalars as the candidate ABI
// sees them (runtime/abi/forge_kernel.h: forge_tensor, forge_scalar), and the
// memory behind them: buffers carved from the exchange arena (arena.h) between
// canary guards, the guard check, and the poison written into outputs before
// each call. Part of op_args.h.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "forge_kernel.h"
#include "op_spec.h"

namespace forge::worker {

// A tensor and, when guarded, the byte buffer around it: `pad` bytes of a
// canary pattern on both sides, so writes past either end are seen. The pad is
// 64 KiB, and for edge cases (a dim made smaller than captured) as large as the
// largest captured tensor (at most 256 MiB), so a kernel that hard-codes the
// captured shape writes into the guard instead of the heap.
struct Buffer {
  at::Tensor t;     // undefined for a None argument
  at::Tensor base;  // uint8, undefined when not guarded
  int64_t pad = 0;
  int64_t extent = 0;  // bytes the tensor spans
  int64_t shift = 0;   // bytes between the end of the head guard and the tensor
};
constexpr int64_t kGuardBytes = 64 << 10;
class Arena;
// While an arena is set, alloc_tensor and clone_buffer carve every buffer
// from it: that is the candidate's memory (arena.h). nullptr: torch's allocator.
void set_exchange_arena(Arena* arena);
// The guard's canary byte for this evaluation.
void set_guard_byte(uint8_t byte);
// The arena cannot hold a buffer: the evaluation is retried with a larger one.
struct ArenaFull : std::runtime_error {
  explicit ArenaFull(int64_t bytes)
      : std::runtime_error("the exchange arena cannot hold " + std::to_string(bytes) + " more bytes"), bytes(bytes) {}
  int64_t bytes;
};
// shift_elems > 0 (guarded only): the tensor starts that many elements past the
// guard, so its data is not aligned as an allocation's would be.
Buffer alloc_tensor(at::IntArrayRef sizes, at::IntArrayRef strides, c10::ScalarType dtype, c10::Device device,
                    bool guarded, int64_t guard_bytes = kGuardBytes, int64_t shift_elems = 0);
// A fresh buffer of the same layout holding the same values.
Buffer clone_buffer(const Buffer& b, bool guarded, int64_t guard_bytes = kGuardBytes);
// Index of the first byte of a guard that is not the canary, relative to the
// tensor (negative: before it), or nullopt when both guards are intact.
std::optional<int64_t> damaged_guard(const Buffer& b);

// ABI views.
int32_t forge_dtype(c10::ScalarType t);  // -1 when the ABI has no such dtype
forge_tensor forge_view(const at::Tensor& t);
std::vector<forge_scalar> forge_scalars(const std::vector<ArgSpec>& specs);
// "" or why these outputs cannot be expressed in the ABI.
std::string abi_problem_of_outputs(const std::vector<at::Tensor>& outs);

// Fills with NaN (floating) or the byte 0x5A (integers, bool).
void poison(const at::Tensor& t);
// Fills with a poison chosen by `pattern` (drawn at random per call): NaN, a
// large finite value, an infinity or a repeated byte; never zero.
void poison(const at::Tensor& t, uint64_t pattern);

int64_t tensor_bytes(const at::Tensor& t);  // numel * element size; 0 when undefined

}  // namespace forge::worker
