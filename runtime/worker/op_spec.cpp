// The worker's parsing (op_spec.h): the request's op and argument records,
// and the family.
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include "op_spec.h"

#include "../common/abi_args.h"

#include "abi_views.h"
#include "op_args_detail.h"

namespace forge::worker {
namespace {

using detail::bad;
using detail::contiguous;
using detail::parse_dtype;

bool schema_is_tensor(const c10::TypePtr& type) {
  c10::TypePtr t = type;
  if (t->kind() == c10::TypeKind::OptionalType) t = t->castRaw<c10::OptionalType>()->getElementType();
  return t->kind() == c10::TypeKind::TensorType;
}

int64_t get_int(const json& j, const char* what) {
  if (!j.is_number_integer()) bad(std::string(what) + " must be an integer");
  return j.get<int64_t>();
}

std::vector<int64_t> get_ints(const json& j, const char* what) {
  if (!j.is_array()) bad(std::string(what) + " must be an array of integers");
  std::vector<int64_t> v;
  for (const auto& x : j) v.push_back(get_int(x, what));
  return v;
}

// Parses one capture record into spec (kind, values). Tensor metadata too.
void parse_record(const json& rec, ArgSpec& a, size_t index, bool cuda_available) {
  if (!rec.is_object() || !rec.contains("type") || !rec["type"].is_string())
    bad("args[" + std::to_string(index) + "] is not an argument record with a \"type\"");
  a.type = rec["type"].get<std::string>();
  if (rec.contains("name") && rec["name"].is_string()) a.name = rec["name"].get<std::string>();
  const std::string& t = a.type;
  auto value = [&]() -> const json& {
    if (!rec.contains("value")) bad("args[" + std::to_string(index) + "] (" + t + ") has no \"value\"");
    return rec["value"];
  };
  if (t == "Tensor") {
    a.kind = ArgKind::Tensor;
    a.changed = rec.value("changed", false);
    if (!rec.contains("dtype") || !rec["dtype"].is_string()) bad("args[" + std::to_string(index) + "]: no dtype");
    auto dt = parse_dtype(rec["dtype"].get<std::string>());
    if (!dt) bad("args[" + std::to_string(index) + "]: unknown dtype " + rec["dtype"].dump());
    a.dtype = *dt;
    a.sizes = get_ints(rec.value("sizes", json()), "sizes");
    a.strides = rec.contains("strides") ? get_ints(rec["strides"], "strides")
                                        : contiguous(a.sizes);
    if (a.sizes.size() != a.strides.size()) bad("args[" + std::to_string(index) + "]: sizes and strides differ in length");
    for (int64_t s : a.sizes)
      if (s < 0) bad("args[" + std::to_string(index) + "]: negative size");
    std::string dev = rec.value("device", std::string("cpu"));
    if (dev.rfind("cuda", 0) == 0) {
      if (!cuda_available) bad("args[" + std::to_string(index) + "] is on " + dev + " but this worker has no CUDA device");
      // Every CUDA tensor goes to the worker's device (the current one).
      a.device = c10::Device(c10::kCUDA);
    } else if (dev == "cpu") {
      a.device = c10::Device(c10::kCPU);
    } else {
      bad("args[" + std::to_string(index) + "]: unsupported device " + dev);
    }
  } else if (t == "None") {
    a.kind = ArgKind::None;
  } else if (t == "int") {
    a.kind = ArgKind::Int;
    a.i = get_int(value(), "int value");
  } else if (t == "float") {
    a.kind = ArgKind::Float;
    if (!value().is_number()) bad("args[" + std::to_string(index) + "]: float value must be a number");
    a.f = value().get<double>();
  } else if (t == "bool") {
    a.kind = ArgKind::Bool;
    if (!value().is_boolean()) bad("args[" + std::to_string(index) + "]: bool value must be true or false");
    a.i = value().get<bool>() ? 1 : 0;
  } else if (t == "int[]") {
    a.kind = ArgKind::IntList;
    a.ints = get_ints(value(), "int[] value");
  } else if (t == "list") {
    // A generic list: an int list when every item is an int record.
    a.kind = ArgKind::IntList;
    if (!value().is_array()) bad("args[" + std::to_string(index) + "]: list value must be an array");
    for (const auto& item : value()) {
      if (!item.is_object() || item.value("type", std::string()) != "int" || !item.contains("value")) {
        a.kind = ArgKind::Unsupported;
        break;
      }
      a.ints.push_back(get_int(item["value"], "list item"));
    }
  } else if (t == "ScalarType") {
    a.kind = ArgKind::Dtype;
    if (!value().is_string()) bad("args[" + std::to_string(index) + "]: ScalarType value must be a dtype name");
    auto dt = parse_dtype(value().get<std::string>());
    if (!dt) bad("args[" + std::to_string(index) + "]: unknown dtype " + value().dump());
    a.i = static_cast<int64_t>(*dt);
  } else if (t == "Layout") {
    // Passed as torch's enum value (FORGE_ARG_INT): only strided is meaningful here.
    std::string v = value().is_string() ? value().get<std::string>() : std::string();
    if (v == "strided") {
      a.kind = ArgKind::Int;
      a.i = static_cast<int64_t>(c10::kStrided);
    } else {
      a.kind = ArgKind::Unsupported;
    }
  } else if (t == "MemoryFormat") {
    std::string v = value().is_string() ? value().get<std::string>() : std::string();
    a.kind = ArgKind::Int;
    if (v == "contiguous_format") a.i = static_cast<int64_t>(c10::MemoryFormat::Contiguous);
    else if (v == "preserve_format") a.i = static_cast<int64_t>(c10::MemoryFormat::Preserve);
    else if (v == "channels_last") a.i = static_cast<int64_t>(c10::MemoryFormat::ChannelsLast);
    else if (v == "channels_last_3d") a.i = static_cast<int64_t>(c10::MemoryFormat::ChannelsLast3d);
    else a.kind = ArgKind::Unsupported;
  } else if (t == "str") {
    a.kind = ArgKind::Str;
    if (!value().is_string()) bad("args[" + std::to_string(index) + "]: str value must be a string");
    a.text = value().get<std::string>();
  } else {
    // float[], bool[], Tensor[], complex, Device, Generator, SymInt, SymFloat, other
    a.kind = ArgKind::Unsupported;
  }
}

// The changed inputs and where their new values go: the return that aliases
// the argument (a written `Tensor(a!)` returned, as in-place ops do), else an
// output after the op's returns.
void note_changed_inputs(OpSpec& spec, const c10::FunctionSchema& schema) {
  const auto& formal = schema.arguments();
  const auto& returns = schema.returns();
  for (size_t i = 0; i < spec.args.size(); ++i) {
    if (!spec.args[i].changed || spec.args[i].kind != ArgKind::Tensor) continue;
    spec.changed.push_back(static_cast<int>(i));
    const c10::AliasInfo* in = formal[i].alias_info();
    int returned = -1;
    for (size_t k = 0; k < returns.size() && in && in->isWrite(); ++k) {
      const c10::AliasInfo* out = returns[k].alias_info();
      if (out && out->isWrite() && out->beforeSets() == in->beforeSets()) returned = static_cast<int>(k);
    }
    if (returned >= 0) spec.alias_returns.emplace_back(returned, static_cast<int>(i));
    else spec.extra_outputs.push_back(static_cast<int>(i));
  }
}

}  // namespace

std::optional<c10::ScalarType> dtype_from_name(const std::string& name) { return parse_dtype(name); }

c10::IValue scalar_ivalue(const ArgSpec& a) {
  switch (a.kind) {
    case ArgKind::None: return c10::IValue();
    case ArgKind::Int: return c10::IValue(a.i);
    case ArgKind::Float: return c10::IValue(a.f);
    case ArgKind::Bool: return c10::IValue(a.i != 0);
    case ArgKind::IntList: return c10::IValue(a.ints);
    case ArgKind::Dtype: return c10::IValue(static_cast<c10::ScalarType>(a.i));
    case ArgKind::Str: return c10::IValue(a.text);  // gelu's approximate
    default: bad("argument " + a.name + " (" + a.type + ") cannot be rebuilt");
  }
}

OpSpec parse_op(const json& req, bool cuda_available) {
  OpSpec spec;
  if (!req.contains("op") || !req["op"].is_string()) bad("\"op\" must be a string");
  std::string op = req["op"].get<std::string>();
  std::string overload = req.contains("overload") && req["overload"].is_string() ? req["overload"].get<std::string>() : "";
  std::string qualified = op.find("::") == std::string::npos ? "aten::" + op : op;
  auto handle = c10::Dispatcher::singleton().findSchema({qualified, overload});
  if (!handle) bad("unknown op " + qualified + (overload.empty() ? "" : "." + overload));
  spec.op = *handle;
  spec.name = overload.empty() ? qualified : qualified + "." + overload;
  const auto& schema = handle->schema();
  const auto& formal = schema.arguments();

  if (!req.contains("args") || !req["args"].is_array()) bad("\"args\" must be an array of argument records");
  const json& args = req["args"];
  if (args.size() > formal.size())
    bad(spec.name + " takes " + std::to_string(formal.size()) + " arguments, the request has " +
        std::to_string(args.size()));
  for (size_t i = 0; i < formal.size(); ++i) {
    ArgSpec a;
    a.name = formal[i].name();
    a.schema_tensor = schema_is_tensor(formal[i].type());
    if (i < args.size()) {
      parse_record(args[i], a, i, cuda_available);
    } else if (formal[i].default_value()) {
      // A trailing argument the record left out: its schema default.
      const c10::IValue& d = *formal[i].default_value();
      if (d.isNone()) a.kind = ArgKind::None;
      else if (d.isBool()) a.kind = ArgKind::Bool, a.i = d.toBool();
      else if (d.isInt()) a.kind = ArgKind::Int, a.i = d.toInt();
      else if (d.isDouble()) a.kind = ArgKind::Float, a.f = d.toDouble();
      else if (d.isIntList()) a.kind = ArgKind::IntList, a.ints = d.toIntVector();
      else a.kind = ArgKind::Unsupported;
      a.type = "default";
    } else {
      bad(spec.name + ": argument " + a.name + " is missing");
    }
    if (a.kind == ArgKind::Tensor && !a.schema_tensor)
      bad(spec.name + ": argument " + a.name + " is a tensor but the schema says " + formal[i].type()->str());
    if (a.schema_tensor && a.kind != ArgKind::Tensor && a.kind != ArgKind::None)
      bad(spec.name + ": argument " + a.name + " must be a tensor or None, got " + a.type);
    if (a.kind == ArgKind::Tensor && a.device.is_cuda()) spec.cuda = true;
    // What the ABI cannot carry: the records' rule (runtime/common/abi_args.h,
    // forge applies it too), then a schema default the ABI has no kind for.
    if (spec.abi_problem.empty()) {
      if (i < args.size())
        spec.abi_problem = abi::arg_problem(args[i], i, a.name);
      else if (a.kind == ArgKind::Unsupported)
        spec.abi_problem = "argument " + std::to_string(i) + " (" + a.name +
                           ") has a default the candidate ABI cannot carry";
    }
    spec.args.push_back(std::move(a));
  }
  note_changed_inputs(spec, schema);
  return spec;
}

}  // namespace forge::worker
