// The capture's op facts: what the dispatcher says about an operator
// (computed once per overload: does it have a CPU/CUDA kernel, a
// CompositeExplicitAutograd one, an autocast one; is it a view or an
// allocation; its argument names and kinds), and the description of a call's
// arguments built from them: the signature text and the "args" JSON
// (docs/CAPTURE.md, "Signatures" and the JSON schema).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/operator_name.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>
#include <vector>

namespace forge::capture {

enum class ArgKind : uint8_t { Plain, ScalarType, Layout, MemoryFormat };

struct OpInfo {
  std::string name;       // "aten::_softmax"
  std::string overload;   // "" or "int"
  std::string qualified;  // "aten::softmax.int"
  std::string ns;         // "aten"
  bool known = false;     // found in the dispatcher
  bool skip = false;      // our own and profiler ops: not recorded at all
  bool aten = false;
  bool kernel_cpu = false, kernel_cuda = false;  // real kernel for the backend key
  bool composite_explicit = false;               // CompositeExplicitAutograd[NonFunctional]
  bool composite_implicit = false;               // CompositeImplicitAutograd
  bool autocast_cpu = false, autocast_cuda = false;
  bool is_view = false, is_alloc = false;
  std::vector<ArgKind> arg_kinds;
  std::vector<std::string> arg_names;
  std::vector<int> write_args;  // arguments the schema marks written (`Tensor(a!)`)
};

// The facts of one operator (overload), computed on first use and kept for the
// process (never freed).
OpInfo* global_op_info(const c10::OperatorName& on);

struct Described {
  std::string signature;
  std::string args_json;
  bool requires_grad = false;
  // The values of the Python numbers among the arguments (0-dim tensors torch
  // wrapped them in: `x * 0.5`), "0.5" or "0.5,2"; "" when there are none.
  std::string numbers;
};

// Appends the tensor's "dtype", "sizes", "strides" and "device" JSON fields.
void tensor_meta_json(std::string& js, const at::Tensor& t);

// Appends the description of one value: JSON object to js, text to sig.
void describe_value(const c10::IValue& v, ArgKind kind, std::string& sig, std::string& js,
                    bool& requires_grad);

// The signature (and, with_args, the "args" JSON) of a call to op.
Described describe(const OpInfo& op, c10::ArrayRef<const c10::IValue> inputs, bool with_args);

}  // namespace forge::capture
