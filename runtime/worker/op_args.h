// The op under evaluation, torch side: its arguments rebuilt from the capture's
// records (docs/CAPTURE.md), the verification cases, the stock reference, the
// mapping onto the candidate ABI (runtime/abi/forge_kernel.h) and the output
// comparisons. Used by evaluate.cpp.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "evaluator.h"
#include "forge_kernel.h"

namespace forge::worker {

enum class ArgKind { Tensor, None, Int, Float, Bool, IntList, Dtype, Unsupported };

// One argument of the op, as captured.
struct ArgSpec {
  std::string name;
  std::string type;            // the record's "type", for messages
  ArgKind kind = ArgKind::None;
  bool schema_tensor = false;  // Tensor or Tensor? in the schema: goes to call.inputs
  // Tensor
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> sizes, strides;
  c10::Device device{c10::kCPU};
  // Int (also Layout and MemoryFormat, as torch's enum value), Bool, Dtype (c10::ScalarType)
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
};

struct OpSpec {
  std::optional<c10::OperatorHandle> op;
  std::string name;  // "aten::_softmax" or "aten::add.Tensor"
  std::vector<ArgSpec> args;
  bool cuda = false;        // some tensor lives on a CUDA device
  std::string abi_problem;  // non-empty: the op cannot be expressed in the ABI
};

// Finds the op in the dispatcher and rebuilds its argument records. Throws
// RequestError for a malformed request or an unknown op.
OpSpec parse_op(const json& request, bool cuda_available);

// The verification parameters of targets/<family>/family.yaml (as JSON).
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};
struct Family {
  std::vector<int64_t> edge_sizes;
  std::vector<std::pair<double, double>> ranges{{-3.0, 3.0}};
  int seeds = 1;
  std::vector<std::string> specials;
  std::vector<std::pair<int, int>> vary;  // {arg index, dim}
  // {int arg index, vary index}: the scalar is that varied extent (group_norm's
  // N is its input's dim 0), so an edge case sets it with the size.
  std::vector<std::pair<int, int>> pins;
  std::pair<int64_t, int64_t> int_range{0, 16};  // [lo, hi) for integer tensors
  json tolerance = json::object();
};
Family parse_family(const json& family);

// Tolerance for an output of dtype `out`; `in` is the first floating input's dtype.
Tolerance tolerance_for(const Family& family, c10::ScalarType out, std::optional<c10::ScalarType> in);

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

// How the inputs of a case are made.
struct CasePlan {
  enum Kind { Sample, Fresh, Edge, Special } kind = Fresh;
  std::string name;
  int sample = 0;              // Sample
  uint64_t seed = 0;           // Fresh, Edge, Special
  double lo = -3, hi = 3;      // value range (also used when refilling in place)
  int edge_arg = -1;           // Edge
  int edge_dim = 0;
  int64_t edge_size = 0;
  int edge_vary = -1;          // Edge: its index in Family::vary (for pins)
  std::string special;         // Special
  int64_t shift_elems = 0;     // inputs start this many elements past an aligned address
};

struct Case {
  CasePlan plan;
  std::vector<ArgSpec> specs;      // the args of this case (edge cases change sizes)
  std::vector<Buffer> buffers;     // per arg; t undefined for non-tensor args
  std::vector<c10::IValue> args;   // the boxed arguments, tensors from buffers
  int64_t guard = kGuardBytes;     // guard bytes of its buffers (outputs too)
};

// The plans, in protocol order: samples, fresh seeds x ranges, edge sizes,
// specials. Unknown specials and impossible edges are skipped with a note.
std::vector<CasePlan> plan_cases(const OpSpec& spec, const json& samples, const Family& family, uint64_t seed,
                                 std::vector<std::string>& notes);

// Allocates (guarded or not) and fills the inputs of a plan.
Case make_case(const OpSpec& spec, const CasePlan& plan, const json& samples, const std::string& samples_dir,
               const Family& family, bool guarded);

// Fills every tensor input of `c` again in place (same addresses) with fresh
// values of the plan's range.
void refill_in_place(Case& c, const Family& family, uint64_t seed);

// Calls the stock kernel through the dispatcher, below autograd, on clones of
// the tensor arguments. Returns the op's returns; throws RequestError when a
// return is not a tensor.
std::vector<at::Tensor> call_stock(const OpSpec& spec, const std::vector<c10::IValue>& args, bool clone_inputs);

// "float32" -> Float (the capture's dtype names); nullopt for an unknown name.
std::optional<c10::ScalarType> dtype_from_name(const std::string& name);

// ABI views.
int32_t forge_dtype(c10::ScalarType t);  // -1 when the ABI has no such dtype
forge_tensor forge_view(const at::Tensor& t);
std::vector<forge_scalar> forge_scalars(const std::vector<ArgSpec>& specs);
// "" or why these outputs cannot be expressed in the ABI.
std::string abi_problem_of_outputs(const std::vector<at::Tensor>& outs);

// Comparisons. `label` names the output ("" for a single output), `where` the
// case ("on case sample 0"), for the detail text.
struct Mismatch {
  std::string reason;  // wrong_result | nan_mismatch
  std::string detail;
};
struct CompareStats {
  double worst_abs = 0;
  double worst_rel = 0;   // |out - ref| / |ref| (|ref| at least FLT_MIN)
  double worst_tol = 0;   // |out - ref| / (atol + rtol |ref|): 1 is the limit
};
std::optional<Mismatch> compare_to_reference(const at::Tensor& out, const at::Tensor& ref, Tolerance tol,
                                             const std::string& label, const std::string& where,
                                             CompareStats& stats);
// The first element whose bits differ, as "[i,j] (a vs b)", or nullopt.
std::optional<std::string> first_bit_difference(const at::Tensor& a, const at::Tensor& b);
// Fills with NaN (floating) or the byte 0x5A (integers, bool).
void poison(const at::Tensor& t);
// Fills with a poison chosen by `pattern` (drawn at random per call): NaN, a
// large finite value, an infinity or a repeated byte; never zero.
void poison(const at::Tensor& t, uint64_t pattern);

std::string index_text(at::IntArrayRef sizes, int64_t flat);
int64_t tensor_bytes(const at::Tensor& t);  // numel * element size; 0 when undefined

}  // namespace forge::worker
