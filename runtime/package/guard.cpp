// The package guard (guard.h): one rule for libforge.so's override and for
// compile.py's torch.compile routing.
#include "guard.h"

#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "../common/dtypes_torch.h"

namespace forge::package {
using worker::ArgKind;
using worker::ArgSpec;
using worker::json;

Guard parse_guard(const json& j, bool cuda, std::string* bound_problem) {
  Guard g;
  json req = {{"op", j.at("op")}, {"overload", j.value("overload", "")}, {"args", j.at("args")}};
  g.spec = worker::parse_op(req, cuda);
  if (!g.spec.abi_problem.empty()) throw std::runtime_error(g.spec.abi_problem);
  g.sig = family::parse(j);
  if (std::string why = family::problem(g.sig); !why.empty()) throw std::runtime_error(why);
  std::string problem;
  g.verified = family::verified_bounds(j, &problem);
  if (bound_problem) *bound_problem = j.contains("vary_max") ? problem : "";
  g.stock_threads = j.value("stock_threads", 0);
  return g;
}

bool plain_tensor(const at::Tensor& t) {
  static const c10::DispatchKeySet wrapped({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot,
                                            c10::DispatchKey::Functionalize, c10::DispatchKey::FuncTorchBatched,
                                            c10::DispatchKey::Batched, c10::DispatchKey::BatchedNestedTensor,
                                            c10::DispatchKey::FuncTorchGradWrapper,
                                            c10::DispatchKey::Conjugate, c10::DispatchKey::Negative,
                                            c10::DispatchKey::ZeroTensor});
  return t.layout() == c10::kStrided && !t.is_meta() && !t.is_nested() && !t.key_set().has_any(wrapped) &&
         !t._fw_grad(0).defined();
}

CallArg describe(const c10::IValue& v, c10::SmallVectorImpl<int64_t>& ints) {
  CallArg a;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      a.kind = CallKind::None;
      return a;
    }
    a.kind = CallKind::Tensor;
    a.dtype = t.scalar_type();
    a.cuda = t.is_cuda();
    a.contiguous = t.is_contiguous();
    a.requires_grad = t.requires_grad();
    a.sizes = std::span<const int64_t>(t.sizes().data(), t.sizes().size());
    a.strides = std::span<const int64_t>(t.strides().data(), t.strides().size());
    a.storage_offset = t.storage_offset();
  } else if (v.isNone()) {
    a.kind = CallKind::None;
  } else if (v.isInt()) {  // also a ScalarType, a Layout, a MemoryFormat
    a.kind = CallKind::Int;
    a.i = v.toInt();
  } else if (v.isDouble()) {
    a.kind = CallKind::Float;
    a.f = v.toDouble();
  } else if (v.isBool()) {
    a.kind = CallKind::Bool;
    a.i = v.toBool();
  } else if (v.isIntList()) {
    a.kind = CallKind::IntList;
    ints.clear();
    for (int64_t x : v.toIntList()) ints.push_back(x);
    a.ints = std::span<const int64_t>(ints.data(), ints.size());
  } else if (v.isString()) {
    a.kind = CallKind::Str;
    a.text = v.toStringRef();
  }
  return a;
}

namespace {

// Argument i of a call against the captured one. Fills `extent` from a tensor's varied dims.
bool arg_matches(const Guard& g, size_t i, const CallArg& a, bool grad, std::vector<int64_t>& extent) {
  const ArgSpec& s = g.spec.args[i];
  const int arg = static_cast<int>(i);
  switch (s.kind) {
    case ArgKind::Tensor:
      if (a.kind != CallKind::Tensor || a.dtype != s.dtype || a.cuda != s.device.is_cuda() ||
          a.sizes.size() != s.sizes.size())
        return false;
      // Forged kernels have no backward of their own: leave training to stock.
      if (grad && a.requires_grad) return false;
      return family::shape_matches(g.sig, arg, s.sizes, a.sizes, extent) &&
             family::layout_matches(g.sig, a.contiguous, a.strides, s.strides, a.storage_offset);
    case ArgKind::None:
      return a.kind == CallKind::None;
    case ArgKind::Int:
      return a.kind == CallKind::Int && family::int_matches(g.sig, arg, a.i, s.i, extent);
    case ArgKind::Float:
      return a.kind == CallKind::Float && a.f == s.f;
    case ArgKind::Bool:
      return a.kind == CallKind::Bool && static_cast<bool>(a.i) == static_cast<bool>(s.i);
    case ArgKind::IntList:
      return a.kind == CallKind::IntList && std::equal(a.ints.begin(), a.ints.end(), s.ints.begin(), s.ints.end());
    case ArgKind::Dtype:  // an eager call carries a ScalarType as an int
      return (a.kind == CallKind::Dtype || a.kind == CallKind::Int) && a.i == s.i;
    case ArgKind::Str:
      return a.kind == CallKind::Str && a.text == s.text;
    default:
      return false;
  }
}

// The rule over n arguments, argument i described by arg_at(i) just before it
// is compared (so one scratch list serves every argument).
template <class ArgAt>
Verdict judge_each(const Guard& g, size_t n, ArgAt&& arg_at, std::vector<int64_t>& extent) {
  if (n != g.spec.args.size()) return Verdict::Outside;
  extent.assign(g.sig.vary.size(), -1);
  const bool grad = c10::GradMode::is_enabled();
  for (size_t i = 0; i < n; ++i)
    if (!arg_matches(g, i, arg_at(i), grad, extent)) return Verdict::Outside;
  // An empty batch, or one larger than the worker verified, goes to stock.
  if (!family::within_verified(g.verified, extent)) return Verdict::Outside;
  // A single-threaded CPU kernel beat stock at stock_threads intra-op threads.
  if (g.stock_threads > 0 && at::get_num_threads() > g.stock_threads) return Verdict::MoreThreads;
  return Verdict::Inside;
}

}  // namespace

Verdict judge(const Guard& g, c10::ArrayRef<c10::IValue> args, std::vector<int64_t>& extent) {
  c10::SmallVector<int64_t, 16> ints;
  return judge_each(g, args.size(), [&](size_t i) { return describe(args[i], ints); }, extent);
}

Verdict judge(const Guard& g, std::span<const CallArg> args, std::vector<int64_t>& extent) {
  return judge_each(g, args.size(), [&](size_t i) -> const CallArg& { return args[i]; }, extent);
}

namespace {

// A described argument and the storage its spans point into.
struct Owned {
  CallArg arg;
  std::vector<int64_t> sizes, strides, ints;
  std::string text;
  void point() {
    arg.sizes = sizes;
    arg.strides = strides;
    arg.ints = ints;
    arg.text = text;
  }
};

std::vector<int64_t> int_list(const json& j, const char* what) {
  if (!j.is_array()) throw std::runtime_error(std::string(what) + " is not an array");
  std::vector<int64_t> out;
  for (const auto& x : j) {
    if (!x.is_number_integer()) throw std::runtime_error(std::string(what) + " holds a non-integer");
    out.push_back(x.get<int64_t>());
  }
  return out;
}

// One argument of compile.py's description (guard.h, forge_guard_judge).
void read_arg(const json& d, Owned& o) {
  if (!d.is_object() || !d.contains("kind") || !d["kind"].is_string())
    throw std::runtime_error("an argument without a \"kind\": " + d.dump());
  const std::string kind = d["kind"].get<std::string>();
  CallArg& a = o.arg;
  if (kind == "Tensor") {
    a.kind = CallKind::Tensor;
    // A dtype outside the table matches no captured tensor: Undefined.
    a.dtype = dtypes::scalar_type(d.at("dtype").get<std::string>()).value_or(c10::ScalarType::Undefined);
    a.cuda = d.at("device").get<std::string>() == "cuda";
    o.sizes = int_list(d.at("sizes"), "sizes");
    o.strides = int_list(d.at("strides"), "strides");
    if (o.sizes.size() != o.strides.size()) throw std::runtime_error("sizes and strides differ in length");
    a.storage_offset = d.at("offset").get<int64_t>();
    a.contiguous = d.at("contiguous").get<bool>();
    a.requires_grad = d.at("requires_grad").get<bool>();
  } else if (kind == "None") {
    a.kind = CallKind::None;
  } else if (kind == "int") {
    a.kind = CallKind::Int;
    a.i = d.at("value").get<int64_t>();
  } else if (kind == "float") {
    a.kind = CallKind::Float;
    const int64_t bits = d.at("bits").get<int64_t>();
    std::memcpy(&a.f, &bits, sizeof a.f);
  } else if (kind == "bool") {
    a.kind = CallKind::Bool;
    a.i = d.at("value").get<bool>();
  } else if (kind == "int[]") {
    a.kind = CallKind::IntList;
    o.ints = int_list(d.at("value"), "int[] value");
  } else if (kind == "ScalarType") {
    auto t = dtypes::scalar_type(d.at("value").get<std::string>());
    if (t) a.kind = CallKind::Dtype, a.i = static_cast<int64_t>(*t);
  } else if (kind == "str") {
    a.kind = CallKind::Str;
    o.text = d.at("value").get<std::string>();
  } else if (kind != "other") {
    throw std::runtime_error("unknown argument kind " + kind);
  }
}

void set_error(const std::string& what, char* error, size_t error_size) {
  if (!error || error_size == 0) return;
  const size_t n = std::min(what.size(), error_size - 1);
  std::memcpy(error, what.data(), n);
  error[n] = '\0';
}

}  // namespace
}  // namespace forge::package

extern "C" void* forge_guard_new(const char* entry_json, char* error, size_t error_size) {
  using namespace forge::package;
  try {
    const auto entry = forge::worker::json::parse(entry_json ? entry_json : "");
    bool cuda = false;  // as libforge.so reads a CUDA package's entries
    for (const auto& rec : entry.at("args"))
      if (rec.is_object() && rec.value("device", std::string()).rfind("cuda", 0) == 0) cuda = true;
    return new Guard(parse_guard(entry, cuda));
  } catch (const std::exception& ex) {
    set_error(ex.what(), error, error_size);
    return nullptr;
  }
}

extern "C" void forge_guard_free(void* guard) { delete static_cast<forge::package::Guard*>(guard); }

extern "C" int forge_guard_judge(const void* guard, const char* call_json, char* error, size_t error_size) {
  using namespace forge::package;
  try {
    if (!guard) throw std::runtime_error("no guard");
    const Guard& g = *static_cast<const Guard*>(guard);
    const auto call = forge::worker::json::parse(call_json ? call_json : "");
    if (!call.is_array()) throw std::runtime_error("the call is not an array of arguments");
    const auto& formal = g.spec.op->schema().arguments();
    // More arguments than the schema has: outside (the count differs from the spec's).
    std::vector<Owned> owned(std::max(call.size(), formal.size()));
    for (size_t i = 0; i < call.size(); ++i) {
      read_arg(call[i], owned[i]);
      // A Python int for a float parameter: a float, as the dispatcher converts it for the override.
      CallArg& a = owned[i].arg;
      if (i < formal.size() && a.kind == CallKind::Int && formal[i].type()->kind() == c10::TypeKind::FloatType)
        a.kind = CallKind::Float, a.f = static_cast<double>(a.i);
    }
    // Trailing arguments left out: their schema defaults, as the dispatcher passes them.
    c10::SmallVector<int64_t, 16> ints;
    for (size_t i = call.size(); i < formal.size(); ++i) {
      if (!formal[i].default_value()) return 0;  // a required argument is missing: not this op's call
      owned[i].arg = describe(*formal[i].default_value(), ints);
      owned[i].ints.assign(ints.begin(), ints.end());
      if (owned[i].arg.kind == CallKind::Str) owned[i].text = std::string(owned[i].arg.text);
    }
    std::vector<CallArg> args;
    args.reserve(owned.size());
    for (auto& o : owned) {
      o.point();
      args.push_back(o.arg);
    }
    std::vector<int64_t> extent;
    switch (judge(g, args, extent)) {
      case Verdict::Inside: return 1;
      case Verdict::MoreThreads: return 2;
      case Verdict::Outside: return 0;
    }
    return 0;
  } catch (const std::exception& ex) {
    set_error(ex.what(), error, error_size);
    return -1;
  }
}
