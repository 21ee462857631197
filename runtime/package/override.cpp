// libforge.so: forge's accepted kernels as ATen overrides (docs/PACKAGE.md).
//
// One generic library, built per torch version with the worker; `forge
// package` puts a copy next to package.json and the kernels' own .so files.
// Loading it (torch.ops.load_library, forge run, or linking) reads
// package.json beside it and registers, per overridden op, one boxed kernel at
// aten's CPU or CUDA key, or at the CompositeImplicitAutograd key of an op
// computed inside its composite (stock.h) (a chain's forge_chain op is defined here first, its
// ATen ops one by one as its stock kernel: docs/PACKAGE.md, "Module forwards"). That kernel tries each forged entry's guard (guard.h:
// the signature family the kernel was verified for, its varied dims no larger
// than the worker verified, runtime/common/signature_family.h; the same code
// decides compile.py's torch.compile routing) and runs the first that
// matches; everything else, a CPU call in a process with more intra-op
// threads than stock had when the kernel beat it, and any kernel that returns
// nonzero, go to the stock kernel (stock.cpp). The kernels are the very
// shared objects the worker verified, not a recompilation.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>
#ifdef FORGE_PACKAGE_CUDA
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "../common/signature_family.h"
#include "../worker/chain_op.h"
#include "../worker/op_args.h"
#include "guard.h"
#include "stock.h"

namespace forge::package {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

void warn(const std::string& m) { std::fprintf(stderr, "forge: warning: %s\n", m.c_str()); }

// FORGE_PACKAGE_TRACE=1: one stderr line per step of every overridden call
// (which entry matched, kernel, fallback), flushed, to locate a crash. Callers
// that build a detail string check tracing() first: this is the per-call path.
bool tracing() {
  static const bool on = std::getenv("FORGE_PACKAGE_TRACE") && std::string(std::getenv("FORGE_PACKAGE_TRACE")) == "1";
  return on;
}
void trace(const char* what, const std::string& detail = "") {
  if (!tracing()) return;
  std::fprintf(stderr, "forge: trace: %s %s\n", what, detail.c_str());
  std::fflush(stderr);
}

// With tracing on, a crash prints the native stack (module+offset and the
// nearest exported symbol; `addr2line -e MODULE OFFSET` names the line), since
// Python's fault handler shows only Python frames.
void print_native_stack(int sig) {
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  std::fprintf(stderr, "forge: trace: signal %d, native stack:\n", sig);
  for (int i = 0; i < n; ++i) {
    Dl_info info{};
    if (::dladdr(frames[i], &info) && info.dli_fname) {
      int status = 0;
      char* name = info.dli_sname ? abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status) : nullptr;
      std::fprintf(stderr, "forge: trace: frame %d %s+0x%lx %s\n", i, info.dli_fname,
                   static_cast<unsigned long>(reinterpret_cast<char*>(frames[i]) - static_cast<char*>(info.dli_fbase)),
                   name ? name : (info.dli_sname ? info.dli_sname : "?"));
    } else {
      std::fprintf(stderr, "forge: trace: frame %d %p\n", i, frames[i]);
    }
  }
  std::fflush(stderr);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

using KernelFn = int (*)(const forge_call*);
using WorkspaceFn = int64_t (*)(const forge_call*);

// One forged kernel and the signature family it may be trusted with.
struct Entry {
  std::string target, signature, strategy;
  Guard guard;  // the captured arguments, the signature family, its bound, stock_threads
  const worker::OpSpec& spec() const { return guard.spec; }
  const family::SignatureFamily& sig() const { return guard.sig; }
  struct Output {
    c10::ScalarType dtype;
    std::vector<int64_t> sizes, strides;
    bool contiguous;
  };
  std::vector<Output> outputs;
  std::vector<forge_scalar> scalars;  // the captured non-tensor arguments
  KernelFn kernel = nullptr;
  WorkspaceFn workspace = nullptr;
  worker::Family family;  // tolerances, for FORGE_PACKAGE_CHECK
  std::atomic<long> forged{0}, kernel_errors{0}, checked{0}, mismatches{0}, more_threads{0};
  std::atomic<double> worst_tol{0};
};

// Calls that went to stock, per (op, call signature) for the report. Keyed by
// a hash of the call's shape (fallback_key), so a call costs a hash and a
// lookup; the signature's text is built once, on a key's first call.
struct Fallback {
  std::string op, signature;
  long calls = 0;
};
struct Counters {
  std::mutex mu;
  std::unordered_map<uint64_t, Fallback> fallback;
  std::vector<std::unique_ptr<Entry>> entries;
};
Counters& counters() {
  static auto* c = new Counters;  // never destroyed: kernels may run during exit
  return *c;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> st(sizes.size());
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    st[d] = s;
    s *= std::max<int64_t>(sizes[d], 1);
  }
  return st;
}

std::string call_signature(c10::ArrayRef<c10::IValue> args) {
  std::ostringstream o;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) o << ", ";
    const auto& v = args[i];
    if (v.isTensor() && v.toTensor().defined()) {
      const at::Tensor& t = v.toTensor();
      o << c10::toString(t.scalar_type()) << t.sizes() << (t.is_contiguous() ? "" : "{strided}")
        << "@" << t.device();
    } else {
      o << v;
    }
  }
  return o.str();
}

// A 64-bit FNV-1a hash of what call_signature prints (dtypes, sizes,
// contiguity, devices, scalar values), each argument's kind and length mixed
// in first so neighbouring arguments cannot run together; `seed` hashes the
// op. Equal signatures give equal keys; a collision of different ones (2^-64
// per pair) would only merge two lines of the report.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void mix(uint64_t v) {
    for (int k = 0; k < 8; ++k, v >>= 8) h = (h ^ (v & 0xff)) * 1099511628211ull;
  }
};
uint64_t op_seed(const std::string& op) {
  Fnv f;
  for (char c : op) f.mix(static_cast<unsigned char>(c));
  return f.h;
}
uint64_t fallback_key(uint64_t seed, c10::ArrayRef<c10::IValue> args) {
  Fnv f{seed};
  for (const auto& v : args) {
    if (v.isTensor() && v.toTensor().defined()) {
      const at::Tensor& t = v.toTensor();
      f.mix(1);
      f.mix(static_cast<uint64_t>(t.dim()));
      f.mix(static_cast<uint64_t>(t.scalar_type()));
      f.mix(static_cast<uint64_t>(t.device().type()) << 8 | static_cast<uint8_t>(t.device().index()));
      f.mix(t.is_contiguous());
      for (int64_t d : t.sizes()) f.mix(static_cast<uint64_t>(d));
    } else if (v.isInt()) {
      f.mix(2);
      f.mix(static_cast<uint64_t>(v.toInt()));
    } else if (v.isDouble()) {
      const double d = v.toDouble();
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      f.mix(3);
      f.mix(bits);
    } else if (v.isBool()) {
      f.mix(v.toBool() ? 5 : 4);
    } else if (v.isIntList()) {
      const auto list = v.toIntList();
      f.mix(6);
      f.mix(list.size());
      for (int64_t i : list) f.mix(static_cast<uint64_t>(i));
    } else if (v.isNone() || v.isTensor()) {
      f.mix(7);
    } else if (v.isString()) {
      f.mix(9);
      for (char c : v.toStringRef()) f.mix(static_cast<unsigned char>(c));
    } else {  // kinds today's ops do not take: their printed form (rare, slower)
      f.mix(8);
      f.mix(std::hash<std::string>{}(call_signature(c10::ArrayRef<c10::IValue>(&v, 1))));
    }
  }
  return f.h;
}

// Runs the entry's kernel; empty when it returned nonzero.
std::optional<std::vector<at::Tensor>> run_forged(Entry& e, c10::ArrayRef<c10::IValue> args,
                                                  const std::vector<int64_t>& extent) {
  std::vector<forge_tensor> inputs;
  c10::Device device(c10::kCPU);
  bool have_device = false;
  const auto& specs = e.spec().args;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i].schema_tensor) continue;
    const c10::IValue& v = args[i];
    at::Tensor t = v.isTensor() ? v.toTensor() : at::Tensor();
    if (t.defined() && !have_device) device = t.device(), have_device = true;
    inputs.push_back(worker::forge_view(t));
  }
  std::vector<forge_scalar> scalars = e.scalars;
  for (const auto& p : e.sig().pins) {  // a pinned int follows its extent
    int k = -1;
    for (int i = 0; i <= p.arg; ++i)
      if (!specs[i].schema_tensor) ++k;
    scalars[k].i = extent[p.vary];
  }
#ifdef FORGE_PACKAGE_CUDA
  std::optional<c10::cuda::CUDAGuard> guard;
  if (device.is_cuda()) guard.emplace(device);
#endif
  std::vector<at::Tensor> outs;
  std::vector<forge_tensor> out_views;
  for (size_t k = 0; k < e.outputs.size(); ++k) {
    const auto& o = e.outputs[k];
    std::vector<int64_t> sizes = o.sizes, strides = o.strides;
    const auto& vo = e.sig().vary_outputs;
    bool follows = !e.sig().vary.empty() && !sizes.empty() && std::find(vo.begin(), vo.end(), k) != vo.end();
    if (follows) sizes[0] = extent[0];
    if (o.contiguous) strides = contiguous_strides(sizes);
    outs.push_back(at::empty_strided(sizes, strides, at::TensorOptions().dtype(o.dtype).device(device)));
    out_views.push_back(worker::forge_view(outs.back()));
  }
  // A changed input's new value (worker/op_spec.h): an output shaped as the input.
  for (int i : e.spec().extra_outputs) {
    const at::Tensor& in = args[static_cast<size_t>(i)].toTensor();
    outs.push_back(at::empty_strided(in.sizes(), in.strides(), in.options()));
    out_views.push_back(worker::forge_view(outs.back()));
  }
  forge_call call{};
  call.inputs = inputs.data();
  call.n_inputs = static_cast<int32_t>(inputs.size());
  call.outputs = out_views.data();
  call.n_outputs = static_cast<int32_t>(out_views.size());
  call.scalars = scalars.data();
  call.n_scalars = static_cast<int32_t>(scalars.size());
#ifdef FORGE_PACKAGE_CUDA
  if (device.is_cuda()) call.stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
#endif
  at::Tensor workspace;
  if (e.workspace) {
    int64_t n = e.workspace(&call);
    if (n < 0) return std::nullopt;
    if (n > 0) {
      workspace = at::empty({n}, at::TensorOptions().dtype(at::kByte).device(device));
      call.workspace = workspace.data_ptr();
      call.workspace_bytes = n;
    }
  }
  if (e.kernel(&call) != 0) return std::nullopt;
  return outs;
}

// The changed inputs take their new values from the kernel's outputs, and a
// return that is an input (an in-place op's self) is that input again; what
// is left are the op's returns.
void apply_changes(const Entry& e, c10::ArrayRef<c10::IValue> args, std::vector<at::Tensor>& outs) {
  const worker::OpSpec& spec = e.spec();
  if (spec.changed.empty()) return;
  at::AutoDispatchBelowADInplaceOrView below_autograd;  // the user's call already went through autograd
  const size_t returns = e.outputs.size();
  for (size_t x = 0; x < spec.extra_outputs.size(); ++x)
    args[static_cast<size_t>(spec.extra_outputs[x])].toTensor().copy_(outs[returns + x]);
  for (const auto& [k, i] : spec.alias_returns) {
    const at::Tensor& in = args[static_cast<size_t>(i)].toTensor();
    in.copy_(outs[static_cast<size_t>(k)]);
    outs[static_cast<size_t>(k)] = in;
  }
  outs.resize(returns);
}

// FORGE_PACKAGE_CHECK=1: every forged call is also run by stock and compared
// with the family's tolerances (the end-to-end check of `forge build`). Stock
// changes copies of the inputs the call changes; their new values are
// compared with the kernel's.
void check_against_stock(Entry& e, const std::vector<at::Tensor>& outs,
                         std::vector<c10::IValue> args, const Stock& stock) {
  for (int i : e.spec().changed)
    if (args[static_cast<size_t>(i)].isTensor()) args[static_cast<size_t>(i)] = args[static_cast<size_t>(i)].toTensor().clone();
  std::vector<c10::IValue> ref = stock(args);
  for (int i : e.spec().extra_outputs) ref.push_back(args[static_cast<size_t>(i)]);
  std::optional<c10::ScalarType> in;
  for (const auto& a : args)
    if (a.isTensor() && a.toTensor().defined() && a.toTensor().is_floating_point()) {
      in = a.toTensor().scalar_type();
      break;
    }
  ++e.checked;
  for (size_t k = 0; k < outs.size() && k < ref.size(); ++k) {
    if (!ref[k].isTensor() || !ref[k].toTensor().defined() || ref[k].toTensor().numel() == 0) continue;
    worker::CompareStats stats;
    auto tol = worker::tolerance_for(e.family, outs[k].scalar_type(), in);
    auto bad = worker::compare_to_reference(outs[k], ref[k].toTensor(), tol, "output " + std::to_string(k),
                                           "in the model", stats);
    if (bad) {
      if (e.mismatches++ == 0) warn(e.target + ": " + bad->detail);
    }
    double w = e.worst_tol.load();
    while (stats.worst_tol > w && !e.worst_tol.compare_exchange_weak(w, stats.worst_tol)) {
    }
  }
}

class Override : public c10::OperatorKernel {
 public:
  Override(std::string op, Stock stock, std::vector<Entry*> entries, bool cuda)
      : m_op(std::move(op)), m_seed(op_seed(m_op)), m_stock(std::move(stock)), m_entries(std::move(entries)),
        m_check(std::getenv("FORGE_PACKAGE_CHECK") && std::string(std::getenv("FORGE_PACKAGE_CHECK")) == "1"),
        m_device(cuda ? c10::DeviceType::CUDA : c10::DeviceType::CPU),
        m_composite(m_stock.override_key() == c10::DispatchKey::CompositeImplicitAutograd) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    if (tracing()) trace("enter", m_op + " stack " + std::to_string(stack->size()));
    const size_t n = op.schema().arguments().size();
    auto args = torch::jit::last(*stack, n);
    if (m_composite && !reaches_kernels(args)) {
      // Tracing, vmap, autograd's forward mode, another device: the composite,
      // not counted as a fallback (a traced tensor's sizes may be symbolic).
      run_stock(stack, n);
      return;
    }
    if (tracing()) trace("args", call_signature(args));
    std::vector<int64_t> extent;
    Entry* thread_bound = nullptr;  // the first entry that matched but for the thread count
    for (Entry* e : m_entries) {
      const Verdict v = judge(e->guard, args, extent);
      if (v == Verdict::Outside) continue;
      if (v == Verdict::MoreThreads) {
        trace("matched, but more threads than stock had", e->target);
        if (!thread_bound) thread_bound = e;
        continue;
      }
      trace("matched", e->target);
      auto outs = run_forged(*e, args, extent);
      trace("kernel returned", outs ? "0" : "nonzero");
      if (!outs) {
        ++e->kernel_errors;
        thread_bound = nullptr;  // counted with the fallbacks, as before
        break;                   // the stock kernel takes it
      }
      ++e->forged;
      if (m_check) check_against_stock(*e, *outs, std::vector<c10::IValue>(args.begin(), args.end()), m_stock);
      apply_changes(*e, args, *outs);
      torch::jit::drop(*stack, n);
      for (auto& t : *outs) torch::jit::push(*stack, std::move(t));
      return;
    }
    if (thread_bound) {
      ++thread_bound->more_threads;  // reported per entry, not as an unknown signature
    } else {
      Counters& c = counters();
      const uint64_t key = fallback_key(m_seed, args);
      std::lock_guard<std::mutex> lock(c.mu);
      Fallback& f = c.fallback[key];
      if (f.calls == 0) {  // a signature's first call: its text, once
        f.op = m_op;
        f.signature = call_signature(args);
      }
      ++f.calls;
    }
    trace("stock");
    run_stock(stack, n);
  }

 private:
  // The stock kernel on the call's n arguments, its returns in their place.
  void run_stock(torch::jit::Stack* stack, size_t n) const {
    auto args = torch::jit::last(*stack, n);
    std::vector<c10::IValue> outs = m_stock(std::vector<c10::IValue>(args.begin(), args.end()));
    if (tracing()) trace("stock returned", std::to_string(outs.size()) + " values");
    torch::jit::drop(*stack, n);
    for (auto& v : outs) torch::jit::push(*stack, std::move(v));
  }

  // Whether every tensor argument is plain (guard.h) and on the package's
  // device: the only calls a kernel may take. At the CPU/CUDA key all are.
  bool reaches_kernels(c10::ArrayRef<c10::IValue> args) const {
    auto ok = [&](const at::Tensor& t) { return !t.defined() || (plain_tensor(t) && t.device().type() == m_device); };
    for (const auto& v : args) {
      if (v.isTensor() && !ok(v.toTensor())) return false;
      if (v.isTensorList())
        for (const at::Tensor& t : v.toTensorList().vec())
          if (!ok(t)) return false;
    }
    return true;
  }

  std::string m_op;
  uint64_t m_seed;  // fallback_key's hash of m_op
  Stock m_stock;
  std::vector<Entry*> m_entries;
  bool m_check;
  c10::DeviceType m_device;  // the package's backend
  bool m_composite;          // registered at CompositeImplicitAutograd (stock.h): every call arrives
};

std::unique_ptr<Entry> load_entry(const json& j, const fs::path& dir, bool cuda) {
  auto e = std::make_unique<Entry>();
  e->target = j.at("target").get<std::string>();
  e->signature = j.value("signature", "");
  e->strategy = j.value("strategy", "");
  std::string bound_problem;
  e->guard = parse_guard(j, cuda, &bound_problem);
  if (!bound_problem.empty())
    warn(e->target + ": " + bound_problem + "; its kernel takes the captured extent only");
  for (const auto& o : j.at("outputs")) {
    auto dt = worker::dtype_from_name(o.value("dtype", ""));
    if (o.value("type", "") != "Tensor" || !dt) throw std::runtime_error("an output is not a tensor");
    std::vector<int64_t> sizes = o.at("sizes"), strides = o.at("strides");
    e->outputs.push_back({*dt, sizes, strides, strides == contiguous_strides(sizes)});
  }
  e->scalars = worker::forge_scalars(e->spec().args);
  e->family = worker::parse_family(j.value("family", json::object()));
  const fs::path so = dir / j.at("kernel").get<std::string>();
  void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
  e->kernel = reinterpret_cast<KernelFn>(::dlsym(h, "forge_kernel"));
  e->workspace = reinterpret_cast<WorkspaceFn>(::dlsym(h, "forge_workspace_bytes"));
  if (!e->kernel) throw std::runtime_error("no forge_kernel in " + so.string());
  return e;
}

std::vector<std::unique_ptr<torch::Library>>& libraries() {
  static auto* libs = new std::vector<std::unique_ptr<torch::Library>>;
  return *libs;
}

void write_report() {
  const char* dir = std::getenv("FORGE_PACKAGE_REPORT");
  if (!dir || !*dir) return;
  Counters& c = counters();
  json r = {{"pid", ::getpid()}, {"entries", json::array()}, {"fallback", json::array()}};
  for (const auto& e : c.entries)
    r["entries"].push_back({{"target", e->target},
                            {"op", e->spec().name},
                            {"signature", e->signature},
                            {"strategy", e->strategy},
                            {"forged", e->forged.load()},
                            {"kernel_errors", e->kernel_errors.load()},
                            {"checked", e->checked.load()},
                            {"mismatches", e->mismatches.load()},
                            {"stock_threads", e->guard.stock_threads},
                            {"more_threads", e->more_threads.load()},
                            {"worst_tol", e->worst_tol.load()}});
  {
    std::lock_guard<std::mutex> lock(c.mu);
    std::map<std::pair<std::string, std::string>, long> sorted;  // a stable report order
    for (const auto& [key, f] : c.fallback) sorted[{f.op, f.signature}] += f.calls;
    for (const auto& [key, n] : sorted)
      r["fallback"].push_back({{"op", key.first}, {"signature", key.second}, {"calls", n}});
  }
  std::ofstream(fs::path(dir) / (std::to_string(::getpid()) + ".json")) << r.dump(1) << "\n";
}

// Reads package.json beside this library and registers the overrides.
struct Loader {
  Loader() {
    Dl_info info{};
    if (!::dladdr(reinterpret_cast<void*>(&write_report), &info) || !info.dli_fname) return;
    const fs::path dir = fs::path(info.dli_fname).parent_path();
    const fs::path manifest = dir / "package.json";
    json pkg;
    try {
      std::ifstream in(manifest);
      if (!in) {
        warn("no " + manifest.string() + ": nothing is overridden");
        return;
      }
      pkg = json::parse(in);
    } catch (const std::exception& ex) {
      warn(manifest.string() + ": " + ex.what());
      return;
    }
    const bool cuda = pkg.value("backend", "cpu") == "cuda";
#ifndef FORGE_PACKAGE_CUDA
    if (cuda) {
      warn("this libforge.so was built without CUDA; nothing is overridden");
      return;
    }
#endif
    Counters& c = counters();
    std::map<std::string, std::vector<Entry*>> by_op;
    for (const auto& j : pkg.value("entries", json::array())) {
      try {
        // A chain's entry (op forge_chain::c_<digest>): its op is defined here,
        // with the chain's ATen ops one by one as the stock kernel the override
        // falls back to, as the worker defined it when it verified the kernel.
        if (j.contains("chain"))
          worker::register_chain({{"op", j.value("op", "")}, {"chain", j["chain"]}, {"cuda_available", cuda}});
        auto e = load_entry(j, dir, cuda);
        by_op[e->spec().name].push_back(e.get());
        c.entries.push_back(std::move(e));
      } catch (const std::exception& ex) {
        warn(j.value("target", std::string("an entry")) + " is not overridden: " + ex.what());
      }
    }
    for (auto& [op, entries] : by_op) {
      std::string why;
      std::optional<Stock> stock = Stock::before_override(*entries.front()->spec().op, cuda, &why);
      if (!stock) {
        warn(op + " is not overridden: " + why);
        continue;
      }
      const std::string ns = op.substr(0, op.find("::"));  // aten, or forge_chain for a chain
      auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, stock->override_key(), "libforge.so", 0);
      lib->impl(op.substr(op.find("::") + 2).c_str(),
                torch::CppFunction::makeFromBoxedFunctor(std::make_unique<Override>(op, std::move(*stock), entries, cuda)));
      libraries().push_back(std::move(lib));
    }
    std::atexit(write_report);
    if (tracing()) {
      ::signal(SIGSEGV, print_native_stack);
      ::signal(SIGABRT, print_native_stack);
    }
  }
};
Loader g_loader;

}  // namespace
}  // namespace forge::package
