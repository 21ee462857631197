// forge capture library (libforge_capture.so).
//
// Loaded into the user's unchanged program (runtime/autoload makes `import
// torch` load it; forge_run_torchscript links it). When FORGE_CAPTURE_DIR is set
// it installs one global RecordFunction callback that sees every ATen op call,
// works out which op reaches a real backend kernel (the "backend op"), and
// aggregates calls and time per (backend op, signature), plus a few sampled
// real inputs per signature. At exit it writes FORGE_CAPTURE_DIR/<pid>.json.
// docs/CAPTURE.md documents the contract, the JSON schema and the rules.
#ifndef NDEBUG
#error "build with -DNDEBUG: RecordFunction's layout depends on it (see docs/CAPTURE.md)"
#endif

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/profiler/orchestration/observer.h>
#include <torch/version.h>
#include <torch/library.h>

#if defined(FORGE_CAPTURE_CUDA)
#include <c10/cuda/CUDAGraphsC10Utils.h>
#endif

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "json.h"
#include "timer.h"

namespace forge::capture {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---------------------------------------------------------------------------
// Names

std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::UInt16: return "uint16";
    case c10::ScalarType::UInt32: return "uint32";
    case c10::ScalarType::UInt64: return "uint64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::ComplexHalf: return "complex32";
    case c10::ScalarType::ComplexFloat: return "complex64";
    case c10::ScalarType::ComplexDouble: return "complex128";
    case c10::ScalarType::Bool: return "bool";
    case c10::ScalarType::QInt8: return "qint8";
    case c10::ScalarType::QUInt8: return "quint8";
    case c10::ScalarType::QInt32: return "qint32";
    case c10::ScalarType::Float8_e5m2: return "float8_e5m2";
    case c10::ScalarType::Float8_e4m3fn: return "float8_e4m3fn";
    case c10::ScalarType::Float8_e5m2fnuz: return "float8_e5m2fnuz";
    case c10::ScalarType::Float8_e4m3fnuz: return "float8_e4m3fnuz";
    default: return c10::toString(t);
  }
}

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
  bool autocast_cpu = false, autocast_cuda = false;
  bool is_view = false, is_alloc = false;
  std::vector<ArgKind> arg_kinds;
  std::vector<std::string> arg_names;
};

// Outermost-op aggregation.
struct OuterStat {
  uint64_t calls = 0;
  int64_t ns = 0;
  int64_t backend_ns = 0;
};

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
  info->autocast_cpu = handle->hasKernelForDispatchKey(c10::DispatchKey::AutocastCPU);
  info->autocast_cuda = handle->hasKernelForDispatchKey(c10::DispatchKey::AutocastCUDA);
  if (handle->hasSchema()) {
    const c10::FunctionSchema& schema = handle->schema();
    for (const auto& a : schema.arguments()) {
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

// ---------------------------------------------------------------------------
// Aggregated state

// One (backend op, signature).
struct Entry {
  uint64_t id = 0;  // 1-based, for the device timer
  OpInfo* op = nullptr;
  std::string kind;         // kernel | composite | view | alloc | foreign
  std::string dispatch_key; // CPU | CUDA
  std::string signature;
  std::string args_json;
  std::string outputs_json;  // the first call's returns, same format as args
  uint64_t calls = 0;
  int64_t wall_ns = 0;
  bool needs_grad = false;  // some call had grad mode on and an input requiring grad
  std::map<OpInfo*, uint64_t> outer;  // outermost op -> calls
  int sample_attempts = 0;
  std::vector<std::string> samples;   // JSON objects
  uint64_t samples_dropped = 0;
};

struct Config {
  std::string dir;
  int samples = 2;
  int64_t max_bytes = int64_t(1) << 30;
};

struct State {
  Config cfg;
  int pid = 0;
  int64_t t_start_ns = 0;
  std::mutex mu;  // everything below
  std::unordered_map<std::string, std::unique_ptr<Entry>> entries;
  std::unordered_map<OpInfo*, OuterStat> outer;
  std::map<std::string, std::string> info;  // forge_capture::note()
  uint64_t next_entry_id = 1;
  uint64_t op_calls = 0;
  uint64_t samples_dropped = 0;
  uint64_t samples_skipped_graph_capture = 0;
  bool dirty = true;
  int flushes = 0;
  std::string last_error;
  // Outside mu.
  std::atomic<int64_t> sample_bytes{0};
  std::atomic<uint64_t> sample_files{0};
  std::atomic<uint64_t> next_sample{0};
  std::atomic<int64_t> overhead_ns{0};
  // Device timer (CUDA builds with CUPTI).
  std::once_flag timer_once;
  std::unique_ptr<DeviceTimer> timer;
  std::string timer_status = "none";
};

std::atomic<State*> g_state{nullptr};
bool g_debug = false;  // FORGE_CAPTURE_DEBUG=1: trace every recorded op to stderr
std::mutex g_ops_mu;
std::unordered_map<std::string, OpInfo*>* g_ops = nullptr;  // qualified -> info (leaked)
at::CallbackHandle g_callback = 0;

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
// Describing arguments: the signature text, the "args" JSON, and samples.

struct Described {
  std::string signature;
  std::string args_json;
  bool requires_grad = false;
};

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

// A sample: the call's inputs, with tensor values copied to host memory.
struct Sample {
  std::string json;  // {"inputs":[...]}
  std::vector<std::pair<std::string, at::Tensor>> files;  // path -> contiguous CPU tensor
  int64_t bytes = 0;
};

int64_t estimate_bytes(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size()) : 0;
  }
  int64_t n = 0;
  if (v.isTensorList()) {
    auto l = v.toTensorList();
    for (size_t i = 0; i < l.size(); ++i) n += estimate_bytes(c10::IValue(l.get(i)));
  } else if (v.isList()) {
    auto l = v.toList();
    for (size_t i = 0; i < l.size(); ++i) n += estimate_bytes(l.get(i));
  }
  return n;
}

bool has_tensor(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().defined();
  if (v.isTensorList()) return v.toTensorList().size() > 0;
  if (v.isList()) {
    auto l = v.toList();
    for (size_t i = 0; i < l.size(); ++i)
      if (has_tensor(l.get(i))) return true;
  }
  return false;
}

// Appends a sample JSON value for v, copying tensors. `snapshot`: the copy must
// not share memory with the input (it is written later, after the op ran).
void sample_value(State& st, const c10::IValue& v, ArgKind kind, bool snapshot, Sample& s) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      s.json += "null";
      return;
    }
    at::Tensor c = t.detach();
    if (c.is_conj()) c = c.resolve_conj();
    if (c.is_neg()) c = c.resolve_neg();
    c = c.to(at::kCPU).contiguous();
    if (snapshot && c.data_ptr() == t.data_ptr()) c = c.clone();
    int64_t nbytes = static_cast<int64_t>(c.numel()) * static_cast<int64_t>(c.element_size());
    std::string file = std::to_string(st.pid) + "-" + std::to_string(st.next_sample++) + ".bin";
    s.json += "{\"type\":\"Tensor\",\"file\":";
    json::str(s.json, file);
    s.json += ',';
    tensor_meta_json(s.json, t);
    s.json += ",\"storage_offset\":";
    json::num(s.json, static_cast<int64_t>(t.storage_offset()));
    s.json += ",\"nbytes\":";
    json::num(s.json, nbytes);
    s.json += '}';
    s.files.emplace_back(st.cfg.dir + "/" + file, std::move(c));
    s.bytes += nbytes;
    return;
  }
  if (has_tensor(v) && (v.isTensorList() || v.isList())) {
    std::vector<c10::IValue> items;
    const char* type = v.isTensorList() ? "Tensor[]" : "list";
    if (v.isTensorList()) {
      auto l = v.toTensorList();
      for (size_t i = 0; i < l.size(); ++i) items.emplace_back(l.get(i));
    } else {
      auto l = v.toList();
      for (size_t i = 0; i < l.size(); ++i) items.emplace_back(l.get(i));
    }
    s.json += "{\"type\":\"";
    s.json += type;
    s.json += "\",\"value\":[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) s.json += ',';
      sample_value(st, items[i], ArgKind::Plain, snapshot, s);
    }
    s.json += "]}";
    return;
  }
  std::string sig;
  bool rg = false;
  describe_value(v, kind, sig, s.json, rg);
}

bool in_graph_capture(c10::ArrayRef<const c10::IValue> inputs, bool any_cuda) {
#if defined(FORGE_CAPTURE_CUDA)
  if (any_cuda) {
    return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
  }
#endif
  return false;
}

// Copies the call's inputs. Returns nullopt when the byte cap does not allow it.
std::optional<Sample> take_sample(State& st, const OpInfo& op, c10::ArrayRef<const c10::IValue> inputs,
                                  bool snapshot) {
  int64_t est = 0;
  for (const auto& v : inputs) est += estimate_bytes(v);
  if (st.sample_bytes.load() + est > st.cfg.max_bytes) return std::nullopt;
  at::DisableRecordFunctionGuard no_record;
  at::NoGradGuard no_grad;
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  Sample s;
  s.json = "{\"inputs\":[";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) s.json += ',';
    sample_value(st, inputs[i], i < op.arg_kinds.size() ? op.arg_kinds[i] : ArgKind::Plain, snapshot, s);
  }
  s.json += "]}";
  return s;
}

bool write_file(const std::string& path, const void* data, size_t n) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return ::close(fd) == 0;
}

// Writes the sample's files (within the byte cap) and records it on the entry.
void commit_sample(State& st, Entry* e, Sample& s) {
  int64_t before = st.sample_bytes.fetch_add(s.bytes);
  bool ok = before + s.bytes <= st.cfg.max_bytes;
  if (ok) {
    for (auto& [path, t] : s.files) {
      if (!write_file(path, t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size())) {
        ok = false;
        break;
      }
      st.sample_files++;
    }
  }
  if (!ok) st.sample_bytes.fetch_sub(s.bytes);
  std::lock_guard<std::mutex> lk(st.mu);
  if (ok) {
    e->samples.push_back(std::move(s.json));
  } else {
    e->samples_dropped++;
    st.samples_dropped++;
  }
  st.dirty = true;
}

// ---------------------------------------------------------------------------
// Per-thread recorder state

enum class Role : uint8_t {
  Skip,             // not an op, or not recorded (our ops, intra-op worker threads)
  Suppressed,       // nested inside a backend op: part of its time
  Transparent,      // composite (decomposes) or not classifiable: look at nested ops
  Backend,          // definite backend op, aggregated at its end
  IgnorablePending, // view/alloc op inside a tentative: kept until the tentative resolves
  Tentative,        // CompositeExplicitAutograd op: backend op unless a nested op is
};

enum class Cls : uint8_t { Transparent, Kernel, Composite, Ignorable, Foreign };

struct PendingOp {
  OpInfo* op;
  std::string kind;
  std::string key;
  Described d;
  int64_t ns;
};

struct Extra {
  Described d;                       // Tentative, IgnorablePending
  std::string kind;
  std::string key;                   // dispatch key name
  std::optional<Sample> sample;      // Tentative: held until committed
  std::vector<PendingOp> pending;    // Tentative: nested views/allocs
};

struct Frame {
  const at::RecordFunction* rf = nullptr;
  OpInfo* op = nullptr;
  Role role = Role::Skip;
  bool outermost = false;
  bool dropped = false;     // Tentative: a nested op turned out to be the backend op
  bool device_timed = false;
  int64_t t0 = 0;
  int64_t ov0 = 0;
  Entry* entry = nullptr;
  std::unique_ptr<Extra> x;
};

struct ThreadState {
  std::vector<Frame> stack;
  std::vector<size_t> tentatives;  // indices of Tentative frames in stack
  int suppress = 0;                // open Backend / IgnorablePending frames
  int op_depth = 0;                // open op frames (not Skip)
  OpInfo* outer = nullptr;         // outermost op of the current chain
  int64_t overhead_ns = 0;         // time spent in our callbacks on this thread
  int64_t backend_ns = 0;          // backend time inside the current outermost op
  std::unordered_map<const char*, OpInfo*> cache;  // RecordFunction::name() -> info
};

thread_local ThreadState* t_state = nullptr;
thread_local bool t_dead = false;

struct ThreadStateOwner {
  bool touched = false;
  ~ThreadStateOwner() {
    t_dead = true;
    delete t_state;
    t_state = nullptr;
  }
};
thread_local ThreadStateOwner t_owner;

ThreadState* thread_state() {
  if (t_state) return t_state;
  if (t_dead) return nullptr;
  t_owner.touched = true;  // constructs it: registers the thread_local destructor
  t_state = new ThreadState;
  t_state->stack.reserve(64);
  return t_state;
}

OpInfo* lookup(ThreadState& ts, const at::RecordFunction& fn) {
  const char* nm = fn.name();
  auto it = ts.cache.find(nm);
  if (it != ts.cache.end() && std::strcmp(it->second->name.c_str(), nm) == 0) return it->second;
  auto on = fn.operator_name();
  if (!on) return nullptr;
  OpInfo* info = global_op_info(*on);
  ts.cache[nm] = info;
  return info;
}

struct Classified {
  Cls cls = Cls::Transparent;
  const char* key = "";
  bool any_cuda = false;
};

// Which dispatch key's kernel this call reaches, and what kind of op it is there.
Classified classify(const OpInfo& op, c10::ArrayRef<const c10::IValue> inputs) {
  Classified c;
  if (!op.known) return c;
  c10::DispatchKeySet ks;
  bool any_cpu = false, any_other = false, any_tensor = false;
  std::optional<c10::Device> device_arg;
  auto add = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    any_tensor = true;
    ks = ks | t.key_set();
    if (t.layout() != c10::kStrided || t.is_quantized() || t.is_nested()) any_other = true;
    switch (t.device().type()) {
      case c10::DeviceType::CPU: any_cpu = true; break;
      case c10::DeviceType::CUDA: c.any_cuda = true; break;
      default: any_other = true;
    }
  };
  for (const auto& v : inputs) {
    if (v.isTensor()) {
      add(v.toTensor());
    } else if (v.isTensorList()) {
      auto l = v.toTensorList();
      for (size_t i = 0; i < l.size(); ++i) add(l.get(i));
    } else if (v.isList()) {
      auto l = v.toList();
      for (size_t i = 0; i < l.size(); ++i)
        if (l.get(i).isTensor()) add(l.get(i).toTensor());
    } else if (v.isDevice() && !device_arg) {
      device_arg = v.toDevice();
    }
  }
  if (any_other) return c;
  auto local = c10::impl::tls_local_dispatch_key_set();
  c10::DispatchKeySet eff = (ks | local.included_) - local.excluded_;
  // Python modes and subclasses (FakeTensor, TorchDispatchMode), functionalization
  // and vmap re-enter the dispatcher with the real call: classify that one.
  static const c10::DispatchKeySet wrappers({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot,
                                             c10::DispatchKey::PythonDispatcher,
                                             c10::DispatchKey::Functionalize,
                                             c10::DispatchKey::FuncTorchDynamicLayerFrontMode,
                                             c10::DispatchKey::FuncTorchBatched,
                                             c10::DispatchKey::Batched});
  if (eff.has_any(wrappers)) return c;
  bool cuda = c.any_cuda;
  if (!any_tensor) {
    if (device_arg && device_arg->type() == c10::DeviceType::CUDA) cuda = true;
    else if (device_arg && device_arg->type() != c10::DeviceType::CPU) return c;
  } else if (!cuda && !any_cpu) {
    return c;
  }
  // Autocast re-calls the op with cast inputs: the nested call is the real one.
  if (cuda && op.autocast_cuda && eff.has(c10::DispatchKey::AutocastCUDA)) return c;
  if (!cuda && op.autocast_cpu && eff.has(c10::DispatchKey::AutocastCPU)) return c;
  c.key = cuda ? "CUDA" : "CPU";
  bool kernel = cuda ? op.kernel_cuda : op.kernel_cpu;
  if (!op.aten) {
    c.cls = kernel ? Cls::Foreign : Cls::Transparent;
    return c;
  }
  if (op.is_view || op.is_alloc) {
    c.cls = (kernel || op.composite_explicit) ? Cls::Ignorable : Cls::Transparent;
    return c;
  }
  if (kernel) c.cls = Cls::Kernel;
  else if (op.composite_explicit) c.cls = Cls::Composite;
  return c;
}

const char* kind_name(Cls cls, const OpInfo& op) {
  switch (cls) {
    case Cls::Kernel: return "kernel";
    case Cls::Composite: return "composite";
    case Cls::Foreign: return "foreign";
    case Cls::Ignorable: return op.is_alloc ? "alloc" : "view";
    default: return "";
  }
}

Entry* get_entry_locked(State& st, OpInfo* op, const std::string& kind, const std::string& key,
                        Described& d) {
  auto it = st.entries.find(d.signature);
  if (it != st.entries.end()) return it->second.get();
  auto e = std::make_unique<Entry>();
  e->id = st.next_entry_id++;
  e->op = op;
  e->kind = kind;
  e->dispatch_key = key;
  e->signature = d.signature;
  e->args_json = std::move(d.args_json);
  Entry* raw = e.get();
  st.entries.emplace(d.signature, std::move(e));
  return raw;
}

void commit_call_locked(State& st, ThreadState& ts, Entry* e, int64_t ns, bool requires_grad) {
  e->calls++;
  e->wall_ns += ns;
  e->needs_grad |= requires_grad;
  e->outer[ts.outer]++;
  ts.backend_ns += ns;
  st.dirty = true;
}

void drop_open_tentatives(ThreadState& ts) {
  for (size_t i : ts.tentatives) ts.stack[i].dropped = true;
}

bool profiler_active() {
  try {
    return torch::profiler::impl::profilerEnabled();
  } catch (...) {
    return true;
  }
}

void device_begin(State& st, Frame& f) {
#if defined(FORGE_CAPTURE_CUPTI)
  std::call_once(st.timer_once, [&] {
    std::string why;
    st.timer = make_cupti_timer(&why);
    st.timer_status = st.timer ? "cupti" : "unavailable: " + why;
  });
  if (st.timer && f.entry) f.device_timed = st.timer->begin(f.entry->id, profiler_active());
#else
  (void)st;
  (void)f;
#endif
}

void device_end(State& st, Frame& f) {
  if (f.device_timed && st.timer) st.timer->end();
}

// Starts a frame for a classified backend candidate.
void start_backend(State& st, ThreadState& ts, Frame& f, const at::RecordFunction& fn, Cls cls,
                   const Classified& c) {
  auto inputs = fn.inputs();
  std::string kind = kind_name(cls, *f.op);
  bool ignorable = cls == Cls::Ignorable;
  bool foreign = cls == Cls::Foreign;
  Described d = describe(*f.op, inputs, !foreign);
  if (ignorable && !ts.tentatives.empty()) {
    // Part of the enclosing tentative op unless that one turns out to be composite.
    f.role = Role::IgnorablePending;
    f.x = std::make_unique<Extra>();
    f.x->d = std::move(d);
    f.x->kind = std::move(kind);
    f.x->key = c.key;
    ts.suppress++;
    return;
  }
  bool tentative = cls == Cls::Composite;
  bool want_sample = false;
  bool rg = d.requires_grad;
  {
    std::lock_guard<std::mutex> lk(st.mu);
    f.entry = get_entry_locked(st, f.op, kind, c.key, d);
    if (!ignorable && !foreign && f.entry->sample_attempts < st.cfg.samples) {
      f.entry->sample_attempts++;
      want_sample = true;
    }
  }
  if (tentative) {
    f.role = Role::Tentative;
    f.x = std::make_unique<Extra>();
    f.x->d.requires_grad = rg;
    ts.tentatives.push_back(ts.stack.size() - 1);
  } else {
    // A real kernel: every open tentative op above it is a decomposition.
    if (!ignorable) drop_open_tentatives(ts);
    f.role = Role::Backend;
    f.x = std::make_unique<Extra>();
    f.x->d.requires_grad = rg;
    ts.suppress++;
  }
  if (want_sample) {
    if (in_graph_capture(inputs, c.any_cuda)) {
      std::lock_guard<std::mutex> lk(st.mu);
      st.samples_skipped_graph_capture++;
    } else {
      std::optional<Sample> s = take_sample(st, *f.op, inputs, /*snapshot=*/tentative);
      if (!s) {
        std::lock_guard<std::mutex> lk(st.mu);
        f.entry->samples_dropped++;
        st.samples_dropped++;
      } else if (tentative) {
        f.x->sample = std::move(s);
      } else {
        commit_sample(st, f.entry, *s);
      }
    }
  }
  if (std::strcmp(c.key, "CUDA") == 0) device_begin(st, f);
}

void start_impl(State& st, ThreadState& ts, const at::RecordFunction& fn, int64_t t_in) {
  ts.stack.emplace_back();
  Frame& f = ts.stack.back();
  f.rf = &fn;
  f.t0 = t_in;
  f.ov0 = ts.overhead_ns;
  if (ts.suppress > 0) {
    // Inside a backend op: no lookup needed, only keep the stack balanced.
    f.role = Role::Suppressed;
    ts.op_depth++;
    return;
  }
  if (at::in_parallel_region()) return;  // intra-op worker: part of an op on another thread
  OpInfo* op = lookup(ts, fn);
  if (!op || op->skip) return;
  f.op = op;
  f.outermost = ts.op_depth == 0;
  ts.op_depth++;
  if (f.outermost) {
    ts.outer = op;
    ts.backend_ns = 0;
  }
  f.role = Role::Transparent;
  Classified c = classify(*op, fn.inputs());
  if (c.cls != Cls::Transparent) start_backend(st, ts, f, fn, c.cls, c);
  if (g_debug) {
    static const char* roles[] = {"skip", "suppressed", "transparent", "backend", "pending", "tentative"};
    std::fprintf(stderr, "forge-capture: %*s%s [%s%s%s]\n", 2 * (ts.op_depth - 1), "", op->qualified.c_str(),
                 roles[static_cast<int>(f.role)], *c.key ? " " : "", c.key);
  }
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  State* st = g_state.load(std::memory_order_acquire);
  if (!st) return nullptr;
  int64_t t_in = now_ns();
  ThreadState* ts = thread_state();
  if (!ts) return nullptr;
  size_t depth = ts->stack.size();
  try {
    start_impl(*st, *ts, fn, t_in);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lk(st->mu);
    st->last_error = e.what();
  } catch (...) {
  }
  if (ts->stack.size() == depth) {  // an exception before the frame was pushed
    ts->stack.emplace_back();
    ts->stack.back().rf = &fn;
  }
  int64_t spent = now_ns() - t_in;
  ts->overhead_ns += spent;
  st->overhead_ns.fetch_add(spent, std::memory_order_relaxed);
  return nullptr;
}

// Describes the returns of an entry's first call (bytes written, output shapes).
// Valid only in the end callback, with needsOutputs(true).
thread_local const at::RecordFunction* t_ending = nullptr;  // set by on_end

void note_outputs_locked(Entry* e, const at::RecordFunction* rf) {
  // Frames unwound without their own end (async ranges) have no outputs to read.
  if (!e || !rf || rf != t_ending || !e->outputs_json.empty()) return;
  std::string sig, js = "[";
  bool requires_grad = false;
  const auto& outs = rf->outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    if (i) js += ',';
    describe_value(outs[i], ArgKind::Plain, sig, js, requires_grad);
  }
  e->outputs_json = js + "]";
}

void end_impl(State& st, ThreadState& ts, Frame& f, int64_t t_in) {
  if (f.role == Role::Skip) return;
  ts.op_depth--;
  int64_t ns = t_in - f.t0 - (ts.overhead_ns - f.ov0);
  if (ns < 0) ns = 0;
  switch (f.role) {
    case Role::Suppressed:
      return;
    case Role::Transparent:
      break;
    case Role::Backend: {
      ts.suppress--;
      device_end(st, f);
      std::lock_guard<std::mutex> lk(st.mu);
      note_outputs_locked(f.entry, f.rf);
      commit_call_locked(st, ts, f.entry, ns, f.x && f.x->d.requires_grad);
      break;
    }
    case Role::IgnorablePending: {
      ts.suppress--;
      if (!ts.tentatives.empty()) {
        Frame& t = ts.stack[ts.tentatives.back()];
        t.x->pending.push_back(PendingOp{f.op, std::move(f.x->kind), std::move(f.x->key),
                                         std::move(f.x->d), ns});
      }
      break;
    }
    case Role::Tentative: {
      ts.tentatives.pop_back();
      device_end(st, f);
      if (g_debug)
        std::fprintf(stderr, "forge-capture: %*s%s: %s\n", 2 * ts.op_depth, "", f.op->qualified.c_str(),
                     f.dropped ? "composite (nested backend op)" : "backend op (leaf)");
      if (!f.dropped) {
        // No nested op reached a real kernel: this op is the backend op.
        drop_open_tentatives(ts);
        if (f.x->sample) commit_sample(st, f.entry, *f.x->sample);
        std::lock_guard<std::mutex> lk(st.mu);
        note_outputs_locked(f.entry, f.rf);
        commit_call_locked(st, ts, f.entry, ns, f.x->d.requires_grad);
      } else if (!f.x->pending.empty()) {
        // Composite after all: its nested views/allocs are backend ops of their own.
        std::lock_guard<std::mutex> lk(st.mu);
        for (PendingOp& p : f.x->pending) {
          Entry* e = get_entry_locked(st, p.op, p.kind, p.key, p.d);
          commit_call_locked(st, ts, e, p.ns, p.d.requires_grad);
        }
      }
      break;
    }
    default:
      break;
  }
  if (f.outermost) {
    std::lock_guard<std::mutex> lk(st.mu);
    OuterStat& o = st.outer[f.op];
    o.calls++;
    o.ns += ns;
    o.backend_ns += ts.backend_ns;
    st.op_calls++;
    st.dirty = true;
    ts.backend_ns = 0;
    ts.outer = nullptr;
  }
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  State* st = g_state.load(std::memory_order_acquire);
  if (!st) return;
  int64_t t_in = now_ns();
  ThreadState* ts = thread_state();
  if (!ts || ts->stack.empty()) return;
  // Frames end in LIFO order; tolerate a mismatch (an async range) by unwinding
  // to the matching frame, or ignoring the end if there is none.
  size_t i = ts->stack.size();
  while (i > 0 && ts->stack[i - 1].rf != &fn) --i;
  if (i == 0) return;
  t_ending = &fn;
  while (ts->stack.size() >= i) {
    Frame f = std::move(ts->stack.back());
    ts->stack.pop_back();
    if (!ts->tentatives.empty() && ts->tentatives.back() >= ts->stack.size() &&
        f.role != Role::Tentative) {
      ts->tentatives.pop_back();  // defensive: keep indices valid
    }
    try {
      end_impl(*st, *ts, f, t_in);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lk(st->mu);
      st->last_error = e.what();
    } catch (...) {
    }
  }
  int64_t spent = now_ns() - t_in;
  ts->overhead_ns += spent;
  st->overhead_ns.fetch_add(spent, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------
// Output

std::string read_cmdline_json() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string js = "[";
  size_t start = 0;
  bool first = true;
  while (start < raw.size()) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    if (!first) js += ',';
    first = false;
    json::str(js, std::string_view(raw).substr(start, end - start));
    start = end + 1;
  }
  return js + "]";
}

std::string cwd() {
  char buf[4096];
  return ::getcwd(buf, sizeof buf) ? std::string(buf) : std::string();
}

std::string flush_impl(State& st) {
  std::unordered_map<uint64_t, DeviceTime> device;
  if (st.timer) st.timer->collect(device);

  std::lock_guard<std::mutex> lk(st.mu);
  bool use_device = st.timer != nullptr;
  const char* method = use_device ? st.timer->method() : "cpu_wall";

  struct Row {
    Entry* e;
    int64_t time_ns;
    bool device;
  };
  std::vector<Row> rows;
  int64_t total_ns = 0;
  for (auto& [sig, e] : st.entries) {
    if (e->calls == 0) continue;  // only ever seen as a decomposition
    Row r{e.get(), e->wall_ns, false};
    if (use_device && e->dispatch_key == "CUDA") {
      auto it = device.find(e->id);
      r.time_ns = it == device.end() ? 0 : it->second.ns;
      r.device = true;
    }
    total_ns += r.time_ns;
    rows.push_back(r);
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.time_ns != b.time_ns) return a.time_ns > b.time_ns;
    return a.e->signature < b.e->signature;
  });
  int64_t unattributed_ns = 0;
  if (use_device) {
    std::unordered_set<uint64_t> shown;
    for (const Row& r : rows)
      if (r.device) shown.insert(r.e->id);
    for (auto& [id, dt] : device)
      if (!shown.count(id)) unattributed_ns += dt.ns;
  }

  std::string js;
  js.reserve(1 << 16);
  js += "{\n\"version\":1";
  js += ",\n\"pid\":";
  json::num(js, static_cast<int64_t>(::getpid()));
  js += ",\n\"ppid\":";
  json::num(js, static_cast<int64_t>(::getppid()));
  js += ",\n\"argv\":" + read_cmdline_json();
  js += ",\n\"cwd\":";
  json::str(js, cwd());
  js += ",\n\"torch_version\":";
  json::str(js, TORCH_VERSION);
  js += ",\n\"torch_cuda_build\":";
#if defined(FORGE_CAPTURE_CUDA)
  json::boolean(js, true);
#else
  json::boolean(js, false);
#endif
  js += ",\n\"info\":{";
  {
    bool first = true;
    for (auto& [k, v] : st.info) {
      if (!first) js += ',';
      first = false;
      json::str(js, k);
      js += ':';
      json::str(js, v);
    }
  }
  js += "}";
  js += ",\n\"timing\":";
  json::str(js, method);
  js += ",\n\"device_timer\":";
  json::str(js, use_device ? st.timer->status() : st.timer_status);
  js += ",\n\"samples_per_signature\":";
  json::num(js, static_cast<int64_t>(st.cfg.samples));
  js += ",\n\"max_sample_bytes\":";
  json::num(js, st.cfg.max_bytes);
  js += ",\n\"sample_bytes\":";
  json::num(js, st.sample_bytes.load());
  js += ",\n\"sample_files\":";
  json::num(js, st.sample_files.load());
  js += ",\n\"samples_dropped\":";
  json::num(js, st.samples_dropped);
  js += ",\n\"samples_skipped_graph_capture\":";
  json::num(js, st.samples_skipped_graph_capture);
  js += ",\n\"capture_wall_us\":";
  json::micros(js, now_ns() - st.t_start_ns);
  js += ",\n\"overhead_us\":";
  json::micros(js, st.overhead_ns.load());
  js += ",\n\"outer_op_calls\":";
  json::num(js, st.op_calls);
  js += ",\n\"total_backend_time_us\":";
  json::micros(js, total_ns);
  int64_t total_outer = 0;
  for (auto& [op, o] : st.outer) total_outer += o.ns;
  js += ",\n\"total_outer_time_us\":";
  json::micros(js, total_outer);
  if (use_device) {
    js += ",\n\"unattributed_device_time_us\":";
    json::micros(js, unattributed_ns);
  }
  if (!st.last_error.empty()) {
    js += ",\n\"last_error\":";
    json::str(js, st.last_error);
  }
  js += ",\n\"backend_ops\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Entry& e = *rows[i].e;
    js += i ? ",\n" : "\n";
    js += "{\"op\":";
    json::str(js, e.op->name);
    js += ",\"overload\":";
    json::str(js, e.op->overload);
    js += ",\"kind\":";
    json::str(js, e.kind);
    js += ",\"dispatch_key\":";
    json::str(js, e.dispatch_key);
    OpInfo* top = nullptr;
    uint64_t top_n = 0;
    for (auto& [o, n] : e.outer)
      if (n > top_n || (n == top_n && top && o && o->qualified < top->qualified)) {
        top = o;
        top_n = n;
      }
    js += ",\"outer_op\":";
    json::str(js, top ? top->qualified : e.op->qualified);
    js += ",\"outer_ops\":{";
    {
      bool first = true;
      for (auto& [o, n] : e.outer) {
        if (!first) js += ',';
        first = false;
        json::str(js, o ? o->qualified : e.op->qualified);
        js += ':';
        json::num(js, n);
      }
    }
    js += "},\"signature\":";
    json::str(js, e.signature);
    js += ",\"args\":";
    js += e.args_json.empty() ? "[]" : e.args_json;
    js += ",\"outputs\":";
    js += e.outputs_json.empty() ? "[]" : e.outputs_json;
    js += ",\"needs_grad\":";
    json::boolean(js, e.needs_grad);
    js += ",\"calls\":";
    json::num(js, e.calls);
    js += ",\"time_us\":";
    json::micros(js, rows[i].time_ns);
    js += ",\"wall_us\":";
    json::micros(js, e.wall_ns);
    js += ",\"timing\":";
    json::str(js, rows[i].device ? method : "cpu_wall");
    if (rows[i].device) {
      auto it = device.find(e.id);
      js += ",\"device_activities\":";
      json::num(js, it == device.end() ? uint64_t(0) : it->second.kernels);
    }
    js += ",\"samples_dropped\":";
    json::num(js, e.samples_dropped);
    js += ",\"samples\":[";
    for (size_t k = 0; k < e.samples.size(); ++k) {
      if (k) js += ',';
      js += e.samples[k];
    }
    js += "]}";
  }
  js += "\n],\n\"outer_ops\":[";
  std::vector<std::pair<OpInfo*, OuterStat>> outer(st.outer.begin(), st.outer.end());
  std::sort(outer.begin(), outer.end(), [](const auto& a, const auto& b) {
    if (a.second.ns != b.second.ns) return a.second.ns > b.second.ns;
    return a.first->qualified < b.first->qualified;
  });
  for (size_t i = 0; i < outer.size(); ++i) {
    const OpInfo& op = *outer[i].first;
    const OuterStat& o = outer[i].second;
    js += i ? ",\n" : "\n";
    js += "{\"op\":";
    json::str(js, op.name);
    js += ",\"overload\":";
    json::str(js, op.overload);
    js += ",\"name\":";
    json::str(js, op.qualified);
    js += ",\"calls\":";
    json::num(js, o.calls);
    js += ",\"time_us\":";
    json::micros(js, o.ns);
    js += ",\"backend_time_us\":";
    json::micros(js, o.backend_ns);
    js += "}";
  }
  js += "\n]\n}\n";

  std::string path = st.cfg.dir + "/" + std::to_string(::getpid()) + ".json";
  std::string tmp = st.cfg.dir + "/." + std::to_string(::getpid()) + ".json.tmp";
  if (!write_file(tmp, js.data(), js.size()) || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "forge: warning: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    return std::string();
  }
  st.dirty = false;
  st.flushes++;
  return path;
}

std::string flush() {
  State* st = g_state.load(std::memory_order_acquire);
  if (!st) return std::string();
  try {
    return flush_impl(*st);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "forge: warning: capture flush failed: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "forge: warning: capture flush failed\n");
  }
  return std::string();
}

void atexit_flush() {
  State* st = g_state.load(std::memory_order_acquire);
  if (!st) return;
  bool need;
  {
    std::lock_guard<std::mutex> lk(st->mu);
    need = st->dirty || st->flushes == 0;
  }
  if (need) flush();
}

// ---------------------------------------------------------------------------
// Set-up

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || x < 0) {
    std::fprintf(stderr, "forge: warning: ignoring %s=%s (not a non-negative integer)\n", name, v);
    return dflt;
  }
  return x;
}

State* new_state(const Config& cfg) {
  auto* st = new State;  // never freed: must outlive every late callback
  st->cfg = cfg;
  st->pid = static_cast<int>(::getpid());
  st->t_start_ns = now_ns();
  return st;
}

void fork_prepare() {
  if (State* st = g_state.load()) st->mu.lock();
}
void fork_parent() {
  if (State* st = g_state.load()) st->mu.unlock();
}
void fork_child() {
  // The child starts with empty tables: what the parent recorded is the parent's.
  State* old = g_state.load();
  if (!old) return;
  old->mu.unlock();
  g_state.store(new_state(old->cfg));  // the old state is leaked on purpose
}

struct Init {
  Init() {
    const char* dir = std::getenv("FORGE_CAPTURE_DIR");
    if (!dir || !*dir) return;
    try {
      Config cfg;
      cfg.dir = dir;
      while (cfg.dir.size() > 1 && cfg.dir.back() == '/') cfg.dir.pop_back();
      ::mkdir(cfg.dir.c_str(), 0755);
      cfg.samples = static_cast<int>(std::min<int64_t>(env_int("FORGE_CAPTURE_SAMPLES", 2), 1 << 20));
      cfg.max_bytes = env_int("FORGE_CAPTURE_MAX_BYTES", int64_t(1) << 30);
      g_debug = env_int("FORGE_CAPTURE_DEBUG", 0) != 0;
      g_state.store(new_state(cfg));
      g_callback = at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end)
                                             .needsInputs(true)
                                             .needsOutputs(true)
                                             .scopes({at::RecordScope::FUNCTION}));
      std::atexit(atexit_flush);
      pthread_atfork(fork_prepare, fork_parent, fork_child);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "forge: warning: capture disabled: %s\n", e.what());
    }
  }
};
Init g_init;

}  // namespace
}  // namespace forge::capture

// Ops for the Python side (runtime/autoload registers flush() with atexit).
TORCH_LIBRARY(forge_capture, m) {
  m.def("flush() -> str", []() -> std::string { return forge::capture::flush(); });
  m.def("enabled() -> bool",
        []() -> bool { return forge::capture::g_state.load() != nullptr; });
  m.def("note(str key, str value) -> ()", [](std::string key, std::string value) {
    auto* st = forge::capture::g_state.load();
    if (!st) return;
    std::lock_guard<std::mutex> lk(st->mu);
    st->info[key] = value;
  });
}
