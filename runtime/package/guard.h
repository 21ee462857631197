// The package guard (docs/PACKAGE.md, "How a call reaches a forged kernel"):
// does a call lie inside the signature family a package entry's kernel was
// verified for (runtime/common/signature_family.h), may it run at this grad
// mode and thread count? Written once, here, for both callers:
//   - libforge.so's override (override.cpp), on every dispatched call: the
//     call's IValues described in place (describe(): views into the tensors,
//     no allocation beyond a list longer than 16 ints);
//   - the torch.compile routing (runtime/autoload/forge_autoload/compile.py),
//     when Inductor decomposes an op: through the C functions at the end,
//     with ctypes, on the libforge.so the program loaded, given a JSON
//     description of the arguments the decomposition sees (fake tensors).
// Each argument is compared with the captured one by its kind (CallArg), so
// both callers reach the same decision through the same code.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../common/signature_family.h"
#include "../worker/op_spec.h"

namespace forge::package {

// What one entry's guard reads from its package.json entry.
struct Guard {
  worker::OpSpec spec;                      // the captured arguments
  family::SignatureFamily sig;              // vary, pins, contiguous, vary_outputs
  std::vector<family::VaryBound> verified;  // per vary entry: 1..vary_max, or the captured extent alone
  // CPU: the intra-op threads stock had when this kernel beat it (0: any).
  // The kernel is single-threaded, so with more, stock may well be faster.
  int stock_threads = 0;
};

// The guard of a package.json entry (op, overload, args, the signature
// family's keys, vary_max, stock_threads). Throws std::exception on a
// malformed entry, an unknown op or one the candidate ABI cannot carry (such
// an entry is never overridden). *bound_problem: why vary_max could not be
// used (empty when it could, or when the entry has none).
Guard parse_guard(const worker::json& entry, bool cuda, std::string* bound_problem = nullptr);

// One argument of a call, as the guard compares it. Spans and the string view
// point into what was described (the IValue, or the parsed description), which
// outlives the comparison.
enum class CallKind : uint8_t { Tensor, None, Int, Float, Bool, IntList, Dtype, Str, Other };
struct CallArg {
  CallKind kind = CallKind::Other;
  // Tensor
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  bool cuda = false, contiguous = false, requires_grad = false;
  std::span<const int64_t> sizes, strides;
  int64_t storage_offset = 0;
  // Int and Dtype (the c10::ScalarType's value) in i, Bool in i (0/1), Float in f
  int64_t i = 0;
  double f = 0;
  std::span<const int64_t> ints;  // IntList
  std::string_view text;          // Str
};

// A dense tensor whose calls reach the backend kernels as they are. Not: a
// Python subclass (the FakeTensor and FunctionalTensor torch.compile traces
// with), functionalization's or vmap's wrappers, a lazy conjugate or
// negation, a meta, nested or non-strided tensor, a forward-AD dual. An
// override at the CPU/CUDA key never sees one; one at the
// CompositeImplicitAutograd key (stock.h) does, and sends it to the composite.
bool plain_tensor(const at::Tensor& t);

// An eager call's argument; an int list is copied into `ints` (reused across
// arguments: it holds one list at a time).
CallArg describe(const c10::IValue& v, c10::SmallVectorImpl<int64_t>& ints);

enum class Verdict {
  Outside,      // not in the entry's family (or beyond what was verified): stock
  Inside,       // the kernel may run
  MoreThreads,  // inside, but a CPU kernel with more intra-op threads than stock had
};

// The rule: every argument against the captured one (the family's pieces in
// signature_family.h per argument: shape, layout, pins), no tensor requiring
// grad while grad mode is on (c10::GradMode, the thread's, as
// torch.is_grad_enabled() reads it), the varied extents within what was
// verified, then the thread count (at::get_num_threads(), torch's). Fills
// `extent` (one per vary entry) for the kernel call.
Verdict judge(const Guard& g, c10::ArrayRef<c10::IValue> args, std::vector<int64_t>& extent);
Verdict judge(const Guard& g, std::span<const CallArg> args, std::vector<int64_t>& extent);

}  // namespace forge::package

// The guard for callers outside C++ (compile.py, with ctypes). `error` gets a
// NUL-terminated reason (truncated to error_size) where a function fails.
extern "C" {
// A guard for one package.json entry (its JSON text); null when the entry is
// malformed or not one libforge.so would override. Never freed by compile.py
// (one per routed entry, for the life of the process).
void* forge_guard_new(const char* entry_json, char* error, size_t error_size);
void forge_guard_free(void* guard);
// The verdict on one call, described as a JSON array with one object per
// argument (compile.py's _describe): {"kind": "Tensor", "dtype": NAME,
// "device": "cpu"|"cuda", "sizes": [...], "strides": [...], "offset": N,
// "contiguous": B, "requires_grad": B}, {"kind": "None"}, {"kind": "int",
// "value": N}, {"kind": "float", "bits": N} (the IEEE-754 bits as an int64, so
// NaN and infinities travel), {"kind": "bool", "value": B}, {"kind": "int[]",
// "value": [...]}, {"kind": "ScalarType", "value": NAME}, {"kind": "str",
// "value": S}, {"kind": "other"}. Dtype names are dtypes.h's (torch's own).
// Trailing arguments the call leaves out take their schema defaults, and an
// int given for a float parameter is that float, as the dispatcher gives them
// to the override. Returns 1 inside, 0 outside, 2 inside
// but for the thread count, -1 for a malformed description (`error` says why).
int forge_guard_judge(const void* guard, const char* call_json, char* error, size_t error_size);
}
