// The capture's op facts (op_facts.h): per-operator facts from the dispatcher,
// and the signature text and "args" JSON of a call.
#ifndef NDEBUG
#error "build with -DNDEBUG: RecordFunction's layout depends on it (see docs/CAPTURE.md)"
#endif

#include "op_facts.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>

#include <mutex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "../common/dtypes_torch.h"
#include "json.h"

namespace forge::capture {
namespace {

// ---------------------------------------------------------------------------
// Names

// The dtype table's name (runtime/common/dtypes.h), else c10's.
std::string dtype_name(c10::ScalarType t) { return dtypes::name_of(t); }

std::string layout_name(c10::Layout l) {
  switch (l) {
    case c10::kStrided: return "strided";
    case c10::kSparse: return "sparse_coo";
    case c10::kSparseCsr: return "sparse_csr";
    default: {
      std::ostringstream s;
      s << l;
      return s.str();
    }
  }
}

std::string memory_format_name(c10::MemoryFormat m) {
  switch (m) {
    case c10::MemoryFormat::Contiguous: return "contiguous_format";
    case c10::MemoryFormat::Preserve: return "preserve_format";
    case c10::MemoryFormat::ChannelsLast: return "channels_last";
    case c10::MemoryFormat::ChannelsLast3d: return "channels_last_3d";
    default: return "memory_format_" + std::to_string(static_cast<int>(m));
  }
}

// ---------------------------------------------------------------------------
// Per-operator facts, computed once per operator (overload) from the dispatcher.

ArgKind arg_kind(const c10::TypePtr& type) {
  c10::TypePtr t = type;
  if (t->kind() == c10::TypeKind::OptionalType) t = t->castRaw<c10::OptionalType>()->getElementType();
  switch (t->kind()) {
    case c10::TypeKind::ScalarTypeType: return ArgKind::ScalarType;
    case c10::TypeKind::LayoutType: return ArgKind::Layout;
    case c10::TypeKind::MemoryFormatType: return ArgKind::MemoryFormat;
    default: return ArgKind::Plain;
  }
}

const std::unordered_set<std::string>& alloc_ops() {
  static const auto* s = new std::unordered_set<std::string>{
      "aten::empty",         "aten::empty_strided", "aten::empty_like",
      "aten::new_empty",     "aten::new_empty_strided", "aten::empty_permuted",
      "aten::resize_",       "aten::resize_as_",    "aten::set_",
      "aten::_empty_affine_quantized"};
  return *s;
}

// Views whose schema carries no alias annotation.
// Views whose schema carries no (or a write) alias annotation: the in-place
// metadata ops only restride their argument.
const std::unordered_set<std::string>& extra_view_ops() {
  static const auto* s = new std::unordered_set<std::string>{
      "aten::_unsafe_view", "aten::lift_fresh", "aten::_reshape_alias", "aten::detach_",
      "aten::as_strided_",  "aten::squeeze_",   "aten::unsqueeze_",     "aten::transpose_",
      "aten::t_",           "aten::swapdims_",  "aten::swapaxes_",      "aten::_resize_output_"};
  return *s;
}

OpInfo* make_op_info(const c10::OperatorName& on) {
  auto* info = new OpInfo;  // lives for the process
  info->name = on.name;
  info->overload = on.overload_name;
  info->qualified = on.overload_name.empty() ? on.name : on.name + "." + on.overload_name;
  auto sep = on.name.find("::");
  info->ns = sep == std::string::npos ? std::string() : on.name.substr(0, sep);
  info->aten = info->ns == "aten";
  info->skip = info->ns == "forge_capture" || info->ns == "profiler";
  auto handle = c10::Dispatcher::singleton().findOp(on);
  if (!handle) return info;
  info->known = true;
  info->kernel_cpu = handle->hasKernelForDispatchKey(c10::DispatchKey::CPU);
  info->kernel_cuda = handle->hasKernelForDispatchKey(c10::DispatchKey::CUDA);
  info->composite_explicit =
      handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
      handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
  info->composite_implicit = handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
  info->autocast_cpu = handle->hasKernelForDispatchKey(c10::DispatchKey::AutocastCPU);
  info->autocast_cuda = handle->hasKernelForDispatchKey(c10::DispatchKey::AutocastCUDA);
  if (handle->hasSchema()) {
    const c10::FunctionSchema& schema = handle->schema();
    for (const auto& a : schema.arguments()) {
      if (a.alias_info() && a.alias_info()->isWrite()) info->write_args.push_back(static_cast<int>(info->arg_names.size()));
      info->arg_kinds.push_back(arg_kind(a.real_type()));  // type() says int for dtypes
      info->arg_names.push_back(a.name());
    }
    for (const auto& r : schema.returns()) {
      const c10::AliasInfo* ai = r.alias_info();
      if (ai && !ai->isWrite()) info->is_view = true;
    }
  }
  if (extra_view_ops().count(info->name)) info->is_view = true;
  if (alloc_ops().count(info->name)) info->is_alloc = true;
  return info;
}

std::mutex g_ops_mu;
std::unordered_map<std::string, OpInfo*>* g_ops = nullptr;  // qualified -> info (leaked)

void tensor_sig(std::string& sig, const at::Tensor& t) {
  sig += dtype_name(t.scalar_type());
  sig += '[';
  bool first = true;
  for (int64_t s : t.sizes()) {
    if (!first) sig += ',';
    first = false;
    json::num(sig, s);
  }
  sig += "]{";
  first = true;
  for (int64_t s : t.strides()) {
    if (!first) sig += ',';
    first = false;
    json::num(sig, s);
  }
  sig += "}@";
  sig += t.device().str();
}

template <typename T, typename F>
void list_both(std::string& sig, std::string& js, const char* type, const T& list, F each) {
  js += "{\"type\":\"";
  js += type;
  js += "\",\"value\":[";
  sig += '[';
  bool first = true;
  for (const auto& x : list) {
    if (!first) {
      js += ',';
      sig += ',';
    }
    first = false;
    each(x);
  }
  js += "]}";
  sig += ']';
}

}  // namespace

OpInfo* global_op_info(const c10::OperatorName& on) {
  std::string key = on.overload_name.empty() ? on.name : on.name + "." + on.overload_name;
  std::lock_guard<std::mutex> lk(g_ops_mu);
  if (!g_ops) g_ops = new std::unordered_map<std::string, OpInfo*>;
  auto it = g_ops->find(key);
  if (it != g_ops->end()) return it->second;
  OpInfo* info = make_op_info(on);
  g_ops->emplace(std::move(key), info);
  return info;
}

// ---------------------------------------------------------------------------
// Describing arguments: the signature text and the "args" JSON.

void tensor_meta_json(std::string& js, const at::Tensor& t) {
  js += "\"dtype\":";
  json::str(js, dtype_name(t.scalar_type()));
  js += ",\"sizes\":[";
  bool first = true;
  for (int64_t s : t.sizes()) {
    if (!first) js += ',';
    first = false;
    json::num(js, s);
  }
  js += "],\"strides\":[";
  first = true;
  for (int64_t s : t.strides()) {
    if (!first) js += ',';
    first = false;
    json::num(js, s);
  }
  js += "],\"device\":";
  json::str(js, t.device().str());
}

// Appends the description of one value: JSON object to js, text to sig.
void describe_value(const c10::IValue& v, ArgKind kind, std::string& sig, std::string& js,
                    bool& requires_grad) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      sig += "None";
      js += "{\"type\":\"None\"}";
      return;
    }
    tensor_sig(sig, t);
    js += "{\"type\":\"Tensor\",";
    tensor_meta_json(js, t);
    js += ",\"requires_grad\":";
    json::boolean(js, t.requires_grad());
    js += '}';
    requires_grad |= t.requires_grad();
  } else if (v.isNone()) {
    sig += "None";
    js += "{\"type\":\"None\"}";
  } else if (v.isInt()) {
    int64_t x = v.toInt();
    if (kind == ArgKind::ScalarType) {
      std::string n = dtype_name(static_cast<c10::ScalarType>(x));
      sig += n;
      js += "{\"type\":\"ScalarType\",\"value\":";
      json::str(js, n);
      js += '}';
    } else if (kind == ArgKind::Layout) {
      std::string n = layout_name(static_cast<c10::Layout>(x));
      sig += n;
      js += "{\"type\":\"Layout\",\"value\":";
      json::str(js, n);
      js += '}';
    } else if (kind == ArgKind::MemoryFormat) {
      std::string n = memory_format_name(static_cast<c10::MemoryFormat>(x));
      sig += n;
      js += "{\"type\":\"MemoryFormat\",\"value\":";
      json::str(js, n);
      js += '}';
    } else {
      json::num(sig, x);
      js += "{\"type\":\"int\",\"value\":";
      json::num(js, x);
      js += '}';
    }
  } else if (v.isSymInt()) {
    auto x = v.toSymInt().maybe_as_int();
    if (x) {
      json::num(sig, *x);
      js += "{\"type\":\"int\",\"value\":";
      json::num(js, *x);
      js += '}';
    } else {
      sig += "SymInt";
      js += "{\"type\":\"SymInt\"}";
    }
  } else if (v.isDouble()) {
    json::num(sig, v.toDouble());
    js += "{\"type\":\"float\",\"value\":";
    json::num(js, v.toDouble());
    js += '}';
  } else if (v.isBool()) {
    sig += v.toBool() ? "True" : "False";
    js += "{\"type\":\"bool\",\"value\":";
    json::boolean(js, v.toBool());
    js += '}';
  } else if (v.isComplexDouble()) {
    auto c = v.toComplexDouble();
    sig += "complex(";
    json::num(sig, c.real());
    sig += ',';
    json::num(sig, c.imag());
    sig += ')';
    js += "{\"type\":\"complex\",\"value\":[";
    json::num(js, c.real());
    js += ',';
    json::num(js, c.imag());
    js += "]}";
  } else if (v.isString()) {
    json::str(sig, v.toStringRef());
    js += "{\"type\":\"str\",\"value\":";
    json::str(js, v.toStringRef());
    js += '}';
  } else if (v.isIntList()) {
    auto l = v.toIntList();
    list_both(sig, js, "int[]", l, [&](int64_t x) {
      json::num(sig, x);
      json::num(js, x);
    });
  } else if (v.isDoubleList()) {
    auto l = v.toDoubleList();
    list_both(sig, js, "float[]", l, [&](double x) {
      json::num(sig, x);
      json::num(js, x);
    });
  } else if (v.isBoolList()) {
    auto l = v.toBoolList();
    list_both(sig, js, "bool[]", l, [&](bool x) {
      sig += x ? "True" : "False";
      json::boolean(js, x);
    });
  } else if (v.isTensorList()) {
    auto l = v.toTensorList();
    std::vector<c10::IValue> items;
    items.reserve(l.size());
    for (size_t i = 0; i < l.size(); ++i) items.emplace_back(l.get(i));
    list_both(sig, js, "Tensor[]", items,
              [&](const c10::IValue& x) { describe_value(x, ArgKind::Plain, sig, js, requires_grad); });
  } else if (v.isList()) {
    auto l = v.toList();
    std::vector<c10::IValue> items;
    items.reserve(l.size());
    for (size_t i = 0; i < l.size(); ++i) items.emplace_back(l.get(i));
    list_both(sig, js, "list", items,
              [&](const c10::IValue& x) { describe_value(x, ArgKind::Plain, sig, js, requires_grad); });
  } else if (v.isDevice()) {
    std::string d = v.toDevice().str();
    sig += d;
    js += "{\"type\":\"Device\",\"value\":";
    json::str(js, d);
    js += '}';
  } else if (v.isGenerator()) {
    sig += "Generator";
    js += "{\"type\":\"Generator\"}";
  } else if (v.isSymFloat()) {
    sig += "SymFloat";
    js += "{\"type\":\"SymFloat\"}";
  } else {
    std::string tag = v.tagKind();
    sig += '<' + tag + '>';
    js += "{\"type\":\"other\",\"tag\":";
    json::str(js, tag);
    js += '}';
  }
}

Described describe(const OpInfo& op, c10::ArrayRef<const c10::IValue> inputs, bool with_args) {
  Described d;
  d.signature.reserve(128);
  d.signature = op.qualified;
  if (!with_args) return d;
  d.signature += '(';
  d.args_json = "[";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) {
      d.signature += ", ";
      d.args_json += ',';
    }
    ArgKind kind = i < op.arg_kinds.size() ? op.arg_kinds[i] : ArgKind::Plain;
    size_t at = d.args_json.size();
    describe_value(inputs[i], kind, d.signature, d.args_json, d.requires_grad);
    if (inputs[i].isTensor() && inputs[i].toTensor().defined() &&
        inputs[i].toTensor().unsafeGetTensorImpl()->is_wrapped_number()) {
      const at::Tensor& t = inputs[i].toTensor();
      if (!d.numbers.empty()) d.numbers += ',';
      if (t.scalar_type() == at::kDouble) json::num(d.numbers, *t.const_data_ptr<double>());
      else if (t.scalar_type() == at::kLong) json::num(d.numbers, *t.const_data_ptr<int64_t>());
      else if (t.scalar_type() == at::kBool) d.numbers += *t.const_data_ptr<bool>() ? "True" : "False";
      else d.numbers += '?';  // a complex number: not told apart
    }
    // Insert the argument's name as the object's first key.
    if (i < op.arg_names.size() && d.args_json.size() > at && d.args_json[at] == '{') {
      std::string name = "\"name\":";
      json::str(name, op.arg_names[i]);
      name += ',';
      d.args_json.insert(at + 1, name);
    }
  }
  d.signature += ')';
  d.args_json += ']';
  // Autograd records this call only when grad mode is on.
  d.requires_grad = d.requires_grad && c10::GradMode::is_enabled();
  return d;
}

}  // namespace forge::capture
