// The op's arguments, cases, reference and comparisons (see op_args.h).
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include "op_args.h"

#include "arena.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

namespace forge::worker {
namespace {

[[noreturn]] void bad(const std::string& what) { throw RequestError(what); }

std::vector<int64_t> contiguous(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = s;
    s *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

std::string fmt(double v, int digits = 6) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

struct DtypeName {
  const char* name;
  c10::ScalarType type;
  int32_t forge;  // -1: not in the ABI
};
constexpr DtypeName kDtypes[] = {
    {"float32", c10::ScalarType::Float, FORGE_FLOAT32},   {"float64", c10::ScalarType::Double, FORGE_FLOAT64},
    {"float16", c10::ScalarType::Half, FORGE_FLOAT16},    {"bfloat16", c10::ScalarType::BFloat16, FORGE_BFLOAT16},
    {"int64", c10::ScalarType::Long, FORGE_INT64},        {"int32", c10::ScalarType::Int, FORGE_INT32},
    {"int16", c10::ScalarType::Short, FORGE_INT16},       {"int8", c10::ScalarType::Char, FORGE_INT8},
    {"uint8", c10::ScalarType::Byte, FORGE_UINT8},        {"bool", c10::ScalarType::Bool, FORGE_BOOL},
    {"complex64", c10::ScalarType::ComplexFloat, -1},     {"complex128", c10::ScalarType::ComplexDouble, -1},
    {"uint16", c10::ScalarType::UInt16, -1},              {"uint32", c10::ScalarType::UInt32, -1},
    {"uint64", c10::ScalarType::UInt64, -1},              {"float8_e5m2", c10::ScalarType::Float8_e5m2, -1},
    {"float8_e4m3fn", c10::ScalarType::Float8_e4m3fn, -1},
};

std::optional<c10::ScalarType> parse_dtype(const std::string& s) {
  for (const auto& d : kDtypes)
    if (s == d.name) return d.type;
  return std::nullopt;
}

std::string dtype_text(c10::ScalarType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.name;
  return c10::toString(t);
}

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
  } else {
    // float[], bool[], Tensor[], str, complex, Device, Generator, SymInt, SymFloat, other
    a.kind = ArgKind::Unsupported;
  }
}

// The c10::IValue of a non-tensor argument.
c10::IValue scalar_ivalue(const ArgSpec& a) {
  switch (a.kind) {
    case ArgKind::None: return c10::IValue();
    case ArgKind::Int: return c10::IValue(a.i);
    case ArgKind::Float: return c10::IValue(a.f);
    case ArgKind::Bool: return c10::IValue(a.i != 0);
    case ArgKind::IntList: return c10::IValue(a.ints);
    case ArgKind::Dtype: return c10::IValue(static_cast<c10::ScalarType>(a.i));
    default: bad("argument " + a.name + " (" + a.type + ") cannot be rebuilt");
  }
}

int64_t extent_bytes(at::IntArrayRef sizes, at::IntArrayRef strides, int64_t elem) {
  int64_t span = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    span += (sizes[d] - 1) * std::abs(strides[d]);
  }
  return span * elem;
}

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
  if (!g_arena) return at::empty({n}, opts);
  void* p = g_arena->allocate(std::max<int64_t>(n, 1));
  if (!p) throw ArenaFull(n);
  c10::Storage st(c10::Storage::use_byte_size_t(), n, c10::DataPtr(p, g_arena, &release_to_arena, device), nullptr,
                  false);
  at::Tensor t = at::empty({0}, opts);
  t.set_(st, 0, {n}, {1});
  return t;
}

// The view of t that covers every distinct element once: dims with stride 0
// (broadcast) are narrowed to one element, so fills and copies never write the
// same memory twice.
at::Tensor distinct_view(at::Tensor t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) == 0 && t.size(d) > 1) t = t.narrow(d, 0, 1);
  return t;
}

void fill_random(const at::Tensor& target, double lo, double hi, uint64_t seed, const Family& family) {
  if (!target.defined() || target.numel() == 0) return;
  at::Tensor t = distinct_view(target);
  at::Generator gen = at::globalContext().defaultGenerator(t.device());
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed);
  }
  if (at::isFloatingType(t.scalar_type())) {
    t.uniform_(lo, hi, gen);
  } else if (t.scalar_type() == c10::ScalarType::Bool) {
    t.random_(0, 2, gen);
  } else {
    int64_t a = family.int_range.first, b = family.int_range.second;
    if (b <= a) b = a + 1;
    t.random_(a, b, gen);
  }
}

std::string resolve_sample_path(const json& entry, const std::string& samples_dir) {
  std::string file = entry["file"].get<std::string>();
  if (!file.empty() && file[0] == '/') return file;
  if (samples_dir.empty()) bad("sample file \"" + file + "\" is relative and the request has no \"samples_dir\"");
  return samples_dir + "/" + file;
}

// The per-arg entries of sample k: an array, or the capture's {"inputs": [...]}.
const json& sample_entries(const json& samples, int k) {
  const json& s = samples.at(k);
  if (s.is_object() && s.contains("inputs")) return s["inputs"];
  return s;
}

void load_sample(at::Tensor& target, const ArgSpec& a, const json& entry, const std::string& samples_dir) {
  std::string path = resolve_sample_path(entry, samples_dir);
  int64_t numel = c10::multiply_integers(a.sizes);
  int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(a.dtype));
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) bad("cannot read sample file " + path);
  int64_t size = static_cast<int64_t>(in.tellg());
  if (size != bytes)
    bad("sample file " + path + " has " + std::to_string(size) + " bytes, expected " + std::to_string(bytes) +
        " for " + dtype_text(a.dtype) + c10::str(c10::IntArrayRef(a.sizes)));
  in.seekg(0);
  at::Tensor host = at::empty(a.sizes, at::TensorOptions().dtype(a.dtype).device(c10::kCPU));
  if (bytes > 0 && !in.read(static_cast<char*>(host.data_ptr()), bytes)) bad("cannot read sample file " + path);
  at::Tensor dst = distinct_view(target);
  at::Tensor src = host;
  for (int64_t d = 0; d < target.dim(); ++d)
    if (target.stride(d) == 0 && target.size(d) > 1) src = src.narrow(d, 0, 1);
  dst.copy_(src);
}

// Selects row `r` of t along `dim` (a 1-D view).
at::Tensor row_view(const at::Tensor& t, int64_t dim, int64_t r) {
  at::Tensor v = t.movedim(dim, -1);
  // Unravel r over the leading dims (row-major).
  std::vector<int64_t> idx(static_cast<size_t>(std::max<int64_t>(v.dim() - 1, 0)));
  for (int64_t d = v.dim() - 2; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = r % v.size(d);
    r /= v.size(d);
  }
  for (size_t d = 0; d < idx.size(); ++d) v = v.select(0, idx[d]);
  return v;
}

void apply_special(Case& c, const std::string& special) {
  // The first floating tensor input, along the op's "dim" argument (else the last dim).
  int target = -1;
  for (size_t i = 0; i < c.specs.size(); ++i)
    if (c.specs[i].kind == ArgKind::Tensor && at::isFloatingType(c.specs[i].dtype)) {
      target = static_cast<int>(i);
      break;
    }
  if (target < 0) return;
  at::Tensor t = c.buffers[static_cast<size_t>(target)].t;
  if (t.dim() == 0 || t.numel() == 0) return;
  int64_t dim = t.dim() - 1;
  for (const auto& a : c.specs)
    if (a.name == "dim" && a.kind == ArgKind::Int) dim = c10::maybe_wrap_dim(a.i, t.dim());
  int64_t rows = t.numel() / t.size(dim);
  int64_t mid = rows / 2;
  const double inf = std::numeric_limits<double>::infinity();
  if (special == "neg_inf_row") {
    row_view(t, dim, mid).fill_(-inf);
    if (rows >= 2) {
      // A masked row too (every other element -inf), as attention masks make.
      at::Tensor r0 = row_view(t, dim, mid == 0 ? 1 : 0);
      r0.slice(0, 0, r0.size(0), 2).fill_(-inf);
    }
  } else if (special == "pos_inf") {
    at::Tensor r = row_view(t, dim, mid);
    r.select(0, r.size(0) / 2).fill_(inf);
  } else if (special == "nan") {
    at::Tensor r = row_view(t, dim, mid);
    r.select(0, r.size(0) / 3).fill_(std::numeric_limits<double>::quiet_NaN());
  } else if (special == "mostly_neg_inf_row") {
    // All but one element of the middle row -inf.
    at::Tensor r = row_view(t, dim, mid);
    r.fill_(-inf);
    r.select(0, r.size(0) - 1).fill_(0.5);
  } else if (special == "causal") {
    // Row r keeps its first r+1 elements (an attention mask), wrapping at the row length.
    const int64_t len = t.size(dim);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t keep = r % len + 1;
      if (keep < len) row_view(t, dim, r).slice(0, keep, len).fill_(-inf);
    }
  }
}

// The specials apply_special knows.
bool known_special(const std::string& s) {
  return s == "neg_inf_row" || s == "pos_inf" || s == "nan" || s == "mostly_neg_inf_row" || s == "causal";
}

}  // namespace

// ---------------------------------------------------------------------------

std::optional<c10::ScalarType> dtype_from_name(const std::string& name) { return parse_dtype(name); }

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
    // What the ABI cannot carry.
    if (spec.abi_problem.empty()) {
      if (a.kind == ArgKind::Unsupported)
        spec.abi_problem = "argument " + a.name + " of type " + a.type + " has no representation in the candidate ABI";
      else if (a.kind == ArgKind::Tensor && forge_dtype(a.dtype) < 0)
        spec.abi_problem = "argument " + a.name + " has dtype " + dtype_text(a.dtype) + ", not in the candidate ABI";
      else if (a.kind == ArgKind::Tensor && a.sizes.size() > FORGE_MAX_DIMS)
        spec.abi_problem = "argument " + a.name + " has " + std::to_string(a.sizes.size()) + " dims (ABI max " +
                           std::to_string(FORGE_MAX_DIMS) + ")";
      else if (a.kind == ArgKind::IntList && a.ints.size() > FORGE_MAX_LIST)
        spec.abi_problem = "argument " + a.name + " is a list of " + std::to_string(a.ints.size()) + " (ABI max " +
                           std::to_string(FORGE_MAX_LIST) + ")";
    }
    spec.args.push_back(std::move(a));
  }
  return spec;
}

Family parse_family(const json& fam) {
  Family f;
  if (fam.is_null()) return f;
  if (!fam.is_object()) bad("\"family\" must be an object");
  try {
    if (fam.contains("verify") && fam["verify"].is_object()) {
      const json& v = fam["verify"];
      if (v.contains("edge_sizes")) f.edge_sizes = v["edge_sizes"].get<std::vector<int64_t>>();
      if (v.contains("ranges")) {
        f.ranges.clear();
        for (const auto& r : v["ranges"]) {
          if (!r.is_array() || r.size() != 2) bad("family.verify.ranges entries must be [lo, hi]");
          f.ranges.emplace_back(r[0].get<double>(), r[1].get<double>());
        }
        if (f.ranges.empty()) f.ranges.emplace_back(-3.0, 3.0);
      }
      if (v.contains("seeds")) f.seeds = std::max(1, v["seeds"].get<int>());
      if (v.contains("specials")) f.specials = v["specials"].get<std::vector<std::string>>();
      if (v.contains("int_range")) {
        auto r = v["int_range"].get<std::vector<int64_t>>();
        if (r.size() != 2) bad("family.verify.int_range must be [lo, hi)");
        f.int_range = {r[0], r[1]};
      }
    }
    if (fam.contains("signature_family") && fam["signature_family"].is_object()) {
      const json& s = fam["signature_family"];
      if (s.contains("vary"))
        for (const auto& e : s["vary"]) f.vary.emplace_back(e.at("arg").get<int>(), e.at("dim").get<int>());
      if (s.contains("pins"))
        for (const auto& e : s["pins"]) f.pins.emplace_back(e.at("arg").get<int>(), e.at("vary").get<int>());
    }
    if (fam.contains("tolerance") && fam["tolerance"].is_object()) f.tolerance = fam["tolerance"];
  } catch (const json::exception& e) {
    bad(std::string("malformed \"family\": ") + e.what());
  }
  return f;
}

Tolerance tolerance_for(const Family& family, c10::ScalarType out, std::optional<c10::ScalarType> in) {
  auto lookup = [&](c10::ScalarType t) -> std::optional<Tolerance> {
    std::string key = dtype_text(t);
    if (!family.tolerance.contains(key)) return std::nullopt;
    const json& e = family.tolerance[key];
    if (!e.is_object()) return std::nullopt;
    return Tolerance{e.value("atol", 0.0), e.value("rtol", 0.0)};
  };
  if (!at::isFloatingType(out)) return Tolerance{0, 0};
  if (auto t = lookup(out)) return *t;
  if (in)
    if (auto t = lookup(*in)) return *t;
  switch (out) {
    case c10::ScalarType::Double: return {1e-12, 1e-10};
    case c10::ScalarType::Half: return {1e-3, 1e-3};
    case c10::ScalarType::BFloat16: return {4e-3, 1.6e-2};
    default: return {1e-6, 1e-5};
  }
}

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

namespace {

// The extents a varying dim is verified at (the package trusts the kernel up
// to the largest): every size 1..64, the powers of two from 128 and one each
// side up to the largest, max(4x the captured extent, 64); the family's own
// edge_sizes too. Sizes whose tensor would exceed max(4x captured, 64 MiB)
// are left out, so a huge captured slice is not multiplied 64 times.
std::vector<int64_t> sweep_sizes(const ArgSpec& a, int64_t dim, const std::vector<int64_t>& edge_sizes,
                                 std::vector<std::string>& notes) {
  const int64_t captured = a.sizes[static_cast<size_t>(dim)];
  const int64_t elem = static_cast<int64_t>(c10::elementSize(a.dtype));
  int64_t numel = 1;
  for (int64_t s : a.sizes) numel *= s;
  const int64_t per_slice = captured > 0 ? numel / captured * elem : elem;
  const int64_t budget = std::max<int64_t>(4 * numel * elem, int64_t(64) << 20);
  const int64_t largest = std::max<int64_t>(4 * captured, 64);
  std::vector<int64_t> sizes;
  for (int64_t s = 1; s <= 64; ++s) sizes.push_back(s);
  for (int64_t b = 128; b <= largest; b *= 2) {
    sizes.push_back(b - 1);
    sizes.push_back(b);
    if (b + 1 <= largest) sizes.push_back(b + 1);
  }
  sizes.push_back(largest);
  for (int64_t s : edge_sizes) sizes.push_back(s);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<int64_t> kept;
  int64_t dropped = 0;
  for (int64_t s : sizes) {
    if (s == captured || s < 1) continue;  // the captured extent: the samples and fresh cases
    if (s > captured && s * per_slice > budget) {
      ++dropped;
      continue;
    }
    kept.push_back(s);
  }
  if (dropped > 0)
    notes.push_back(a.name + ".size(" + std::to_string(dim) + "): " + std::to_string(dropped) +
                    " sizes above the verification budget left out");
  return kept;
}

}  // namespace

std::vector<CasePlan> plan_cases(const OpSpec& spec, const json& samples, const Family& family, uint64_t seed,
                                 std::vector<std::string>& notes) {
  std::vector<CasePlan> plans;
  uint64_t n = 0;
  auto next_seed = [&]() { return seed * 1000003ull + (++n) * 7919ull; };
  if (samples.is_array())
    for (size_t k = 0; k < samples.size(); ++k) {
      CasePlan p;
      p.kind = CasePlan::Sample;
      p.sample = static_cast<int>(k);
      p.name = "sample " + std::to_string(k);
      p.seed = next_seed();
      p.lo = family.ranges.front().first;
      p.hi = family.ranges.front().second;
      plans.push_back(p);
    }
  for (int s = 0; s < family.seeds; ++s)
    for (const auto& [lo, hi] : family.ranges) {
      CasePlan p;
      p.kind = CasePlan::Fresh;
      p.seed = next_seed();
      p.lo = lo;
      p.hi = hi;
      p.name = "fresh seed=" + std::to_string(s) + " range=[" + fmt(lo) + "," + fmt(hi) + "]";
      plans.push_back(p);
    }
  for (size_t v = 0; v < family.vary.size(); ++v) {
    const auto [arg, dim] = family.vary[v];
    if (arg < 0 || static_cast<size_t>(arg) >= spec.args.size() || spec.args[arg].kind != ArgKind::Tensor) {
      notes.push_back("signature_family.vary: arg " + std::to_string(arg) + " is not a tensor argument; ignored");
      continue;
    }
    int64_t ndim = static_cast<int64_t>(spec.args[arg].sizes.size());
    if (dim < -ndim || dim >= ndim) {
      notes.push_back("signature_family.vary: arg " + std::to_string(arg) + " has no dim " + std::to_string(dim));
      continue;
    }
    for (int64_t size : sweep_sizes(spec.args[arg], dim < 0 ? dim + ndim : dim, family.edge_sizes, notes)) {
      CasePlan p;
      p.kind = CasePlan::Edge;
      p.seed = next_seed();
      p.lo = family.ranges.front().first;
      p.hi = family.ranges.front().second;
      p.edge_arg = arg;
      p.edge_dim = static_cast<int>(dim < 0 ? dim + ndim : dim);
      p.edge_size = size;
      p.edge_vary = static_cast<int>(v);
      p.name = "edge " + spec.args[arg].name + ".size(" + std::to_string(p.edge_dim) + ")=" + std::to_string(size);
      plans.push_back(p);
    }
  }
  for (const auto& name : family.specials) {
    if (!known_special(name)) {
      notes.push_back("unknown special \"" + name + "\" ignored");
      std::fprintf(stderr, "forge_worker: note: unknown special \"%s\" ignored\n", name.c_str());
      continue;
    }
    CasePlan p;
    p.kind = CasePlan::Special;
    p.special = name;
    p.seed = next_seed();
    p.lo = family.ranges.front().first;
    p.hi = family.ranges.front().second;
    p.name = "special " + name;
    plans.push_back(p);
  }
  // Views a user's program passes: every tensor input one element past an
  // aligned start (x[1:] is contiguous, its data is not 16-byte aligned).
  {
    CasePlan p;
    p.kind = CasePlan::Special;
    p.special = "storage_offset";
    p.shift_elems = 1;
    p.seed = next_seed();
    p.lo = family.ranges.front().first;
    p.hi = family.ranges.front().second;
    p.name = "special storage_offset";
    plans.push_back(p);
  }
  return plans;
}

Case make_case(const OpSpec& spec, const CasePlan& plan, const json& samples, const std::string& samples_dir,
               const Family& family, bool guarded) {
  Case c;
  c.plan = plan;
  c.specs = spec.args;
  if (plan.kind == CasePlan::Edge) {
    int64_t largest = 0;
    for (const auto& a : spec.args)
      if (a.kind == ArgKind::Tensor)
        largest = std::max(largest, extent_bytes(a.sizes, a.strides, static_cast<int64_t>(c10::elementSize(a.dtype))));
    c.guard = std::min<int64_t>(largest + kGuardBytes, int64_t(256) << 20);
    ArgSpec& a = c.specs[static_cast<size_t>(plan.edge_arg)];
    a.sizes[static_cast<size_t>(plan.edge_dim)] = plan.edge_size;
    a.strides = contiguous(a.sizes);
    // A pinned int follows the size, as the package sets it for such a call
    // (runtime/package/override.cpp); without it the stock kernel refuses the case.
    for (const auto& [arg, vary] : family.pins) {
      if (vary != plan.edge_vary || arg < 0 || static_cast<size_t>(arg) >= c.specs.size()) continue;
      ArgSpec& pinned = c.specs[static_cast<size_t>(arg)];
      if (pinned.kind == ArgKind::Int) pinned.i = plan.edge_size;
    }
  }
  const json* entries = nullptr;
  if (plan.kind == CasePlan::Sample) {
    entries = &sample_entries(samples, plan.sample);
    if (!entries->is_array() || entries->size() != c.specs.size())
      bad("samples[" + std::to_string(plan.sample) + "] must have one entry per argument (" +
          std::to_string(c.specs.size()) + ")");
  }
  uint64_t tseed = plan.seed;
  for (size_t i = 0; i < c.specs.size(); ++i) {
    const ArgSpec& a = c.specs[i];
    if (a.kind != ArgKind::Tensor) {
      c.buffers.emplace_back();
      c.args.push_back(scalar_ivalue(a));
      continue;
    }
    Buffer b = alloc_tensor(a.sizes, a.strides, a.dtype, a.device, guarded || plan.shift_elems > 0, c.guard,
                            plan.shift_elems);
    const json* entry = entries ? &(*entries)[i] : nullptr;
    if (entry && entry->is_object() && entry->contains("file") && (*entry)["file"].is_string()) {
      load_sample(b.t, a, *entry, samples_dir);
    } else {
      fill_random(b.t, plan.lo, plan.hi, tseed++, family);
    }
    c.args.emplace_back(b.t);
    c.buffers.push_back(std::move(b));
  }
  if (plan.kind == CasePlan::Special && plan.special != "storage_offset") apply_special(c, plan.special);
  return c;
}

void refill_in_place(Case& c, const Family& family, uint64_t seed) {
  for (auto& b : c.buffers)
    if (b.t.defined()) fill_random(b.t, c.plan.lo, c.plan.hi, seed++, family);
}

std::vector<at::Tensor> call_stock(const OpSpec& spec, const std::vector<c10::IValue>& args, bool clone_inputs) {
  torch::jit::Stack stack;
  stack.reserve(args.size());
  for (const auto& v : args) {
    if (clone_inputs && v.isTensor() && v.toTensor().defined()) stack.emplace_back(v.toTensor().clone());
    else stack.push_back(v);
  }
  {
    // Below autograd: the backend kernel (CPU or CUDA) of the stock library, or
    // the composite it decomposes into, exactly what the backend dispatch key
    // sees in the user's program. No autograd graph is recorded.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    spec.op->callBoxed(&stack);
  }
  std::vector<at::Tensor> outs;
  for (auto& v : stack) {
    if (v.isTensor()) {
      outs.push_back(v.toTensor());
    } else if (v.isNone()) {
      outs.emplace_back();
    } else {
      bad(spec.name + " returns a " + v.tagKind() + ", which the candidate ABI cannot express");
    }
  }
  return outs;
}

int32_t forge_dtype(c10::ScalarType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.forge;
  return -1;
}

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

std::string index_text(at::IntArrayRef sizes, int64_t flat) {
  std::vector<int64_t> idx(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    int64_t s = std::max<int64_t>(sizes[d], 1);
    idx[static_cast<size_t>(d)] = flat % s;
    flat /= s;
  }
  std::string out = "[";
  for (size_t d = 0; d < idx.size(); ++d) {
    if (d) out += ',';
    out += std::to_string(idx[d]);
  }
  out += ']';
  return out;
}

int64_t tensor_bytes(const at::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

namespace {

at::Tensor bits(const at::Tensor& t) {
  switch (t.element_size()) {
    case 1: return t.view(at::kByte);
    case 2: return t.view(at::kShort);
    case 4: return t.view(at::kInt);
    case 8: return t.view(at::kLong);
    default: return t;
  }
}

double value_at(const at::Tensor& flat, int64_t i) { return flat[i].item<double>(); }

}  // namespace

std::optional<Mismatch> compare_to_reference(const at::Tensor& out, const at::Tensor& ref, Tolerance tol,
                                             const std::string& label, const std::string& where,
                                             CompareStats& stats) {
  if (!ref.defined()) return std::nullopt;
  if (ref.numel() == 0) return std::nullopt;
  const std::string prefix = label.empty() ? std::string() : label + ": ";
  if (!at::isFloatingType(ref.scalar_type())) {
    at::Tensor ne = bits(out).ne(bits(ref)).reshape(-1);
    if (!ne.any().item<bool>()) return std::nullopt;
    int64_t i = ne.nonzero().select(1, 0).min().item<int64_t>();
    at::Tensor o = out.reshape(-1).to(at::kDouble), r = ref.reshape(-1).to(at::kDouble);
    return Mismatch{"wrong_result", prefix + "got " + fmt(value_at(o, i)) + ", expected " + fmt(value_at(r, i)) +
                                        " at index " + index_text(ref.sizes(), i) + " " + where +
                                        " (exact match required)"};
  }
  at::Tensor o = out.to(at::kDouble).reshape(-1);
  at::Tensor r = ref.to(at::kDouble).reshape(-1);
  at::Tensor fo = o.isfinite(), fr = r.isfinite();
  at::Tensor same_special = (o.isnan() & r.isnan()) | o.eq(r);
  at::Tensor bad_special = (fo.logical_not() | fr.logical_not()) & same_special.logical_not();
  if (bad_special.any().item<bool>()) {
    int64_t i = bad_special.nonzero().select(1, 0).min().item<int64_t>();
    return Mismatch{"nan_mismatch", prefix + "got " + fmt(value_at(o, i)) + ", expected " + fmt(value_at(r, i)) +
                                        " at index " + index_text(ref.sizes(), i) + " " + where +
                                        " (NaN and inf must match the stock kernel exactly)"};
  }
  at::Tensor both = fo & fr;
  at::Tensor err = (o - r).abs().masked_fill(both.logical_not(), 0.0);
  at::Tensor rabs = r.abs();
  at::Tensor rel = (err / rabs.clamp_min(static_cast<double>(FLT_MIN))).masked_fill(both.logical_not(), 0.0);
  stats.worst_abs = std::max(stats.worst_abs, err.max().item<double>());
  stats.worst_rel = std::max(stats.worst_rel, rel.max().item<double>());
  at::Tensor allowed = rabs * tol.rtol + tol.atol;
  if (tol.atol > 0 || tol.rtol > 0)
    stats.worst_tol = std::max(stats.worst_tol, (err / allowed).masked_fill(allowed.eq(0), 0.0).max().item<double>());
  at::Tensor excess = err - allowed;
  at::Tensor viol = excess.gt(0);
  if (!viol.any().item<bool>()) return std::nullopt;
  // Report the element furthest outside its tolerance.
  int64_t i = excess.argmax().item<int64_t>();
  return Mismatch{"wrong_result", prefix + "max abs err " + fmt(value_at(err, i)) + " (rel " + fmt(value_at(rel, i)) +
                                      ") at index " + index_text(ref.sizes(), i) + " " + where + ": got " +
                                      fmt(value_at(o, i), 9) + ", expected " + fmt(value_at(r, i), 9) + " (atol " +
                                      fmt(tol.atol) + ", rtol " + fmt(tol.rtol) + ")"};
}

std::optional<std::string> first_bit_difference(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || a.numel() == 0) return std::nullopt;
  at::Tensor ne = bits(a).ne(bits(b)).reshape(-1);
  if (!ne.any().item<bool>()) return std::nullopt;
  int64_t i = ne.nonzero().select(1, 0).min().item<int64_t>();
  at::Tensor x = a.reshape(-1).to(at::kDouble), y = b.reshape(-1).to(at::kDouble);
  return index_text(a.sizes(), i) + " (" + fmt(value_at(x, i), 9) + " vs " + fmt(value_at(y, i), 9) + ")";
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
