// The evaluator (docs/WORKER.md): one evaluation in order. The request is
// parsed and the cases planned; the candidate passes the import check, is
// loaded into a fresh runner (its own process, sandboxed, sharing only the
// exchange arena with this judge); then verification (verify.cpp), the
// benchmark (benchmark.cpp) and the runner's orderly exit. Every verdict is
// computed here, after the candidate's calls returned, on memory the judge
// reads itself. Torch-linked.
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include <ATen/ATen.h>
#include <ATen/DeviceAccelerator.h>
#include <ATen/Parallel.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#if __has_include(<torch/headeronly/version.h>)
#include <torch/headeronly/version.h>
#else
#include <torch/version.h>
#endif

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "candidate.h"
#include "chain_op.h"
#include "judge.h"

namespace forge::worker {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The candidate's private copy, which the runner loads (a rebuilt library at
// the same path is always loaded afresh); removed when the evaluation ends.
struct PrivateCopy {
  std::filesystem::path path;
  ~PrivateCopy() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove(path, ec);
  }
};

// Unsets the exchange arena when an evaluation ends (after its tensors died).
struct ArenaScope {
  explicit ArenaScope(Arena* a) { set_exchange_arena(a); }
  ~ArenaScope() { set_exchange_arena(nullptr); }
};

// The judge's own memory during one evaluation (the arena apart): CUDA, the
// caching allocator's peak since the evaluation started, its cache emptied
// at the end (the next evaluation's arena is a cudaMalloc of its own); CPU,
// the peak resident set since the start, which includes the arena pages the
// judge wrote.
class HeldMemory {
 public:
  HeldMemory(bool cuda, int device) : m_cuda(cuda), m_device(static_cast<c10::DeviceIndex>(device)) {
#if defined(FORGE_WORKER_CUDA) && (TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 9)
    if (m_cuda) {
      // The allocator knows a device once it has allocated on it.
      at::empty({1}, at::TensorOptions().device(at::kCUDA, m_device));
      at::accelerator::resetPeakStats(m_device);
      m_start = at::accelerator::getDeviceStats(m_device).allocated_bytes[0].current;
      return;
    }
#endif
    if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {  // resets VmHWM
      std::fputs("5", f);
      std::fclose(f);
    }
    m_start = status_kb("VmRSS:") * 1024;
  }
  ~HeldMemory() {
#if defined(FORGE_WORKER_CUDA) && (TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 9)
    if (m_cuda) at::accelerator::emptyCache();
#endif
  }
  int64_t judge_peak() const {
#if defined(FORGE_WORKER_CUDA) && (TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 9)
    if (m_cuda) return at::accelerator::getDeviceStats(m_device).allocated_bytes[0].peak - m_start;
#endif
    if (m_cuda) return 0;
    return std::max<int64_t>(0, status_kb("VmHWM:") * 1024 - m_start);
  }

 private:
  static int64_t status_kb(const char* key) {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    long long kb = 0;
    const size_t n = std::strlen(key);
    while (std::fgets(line, sizeof line, f))
      if (std::strncmp(line, key, n) == 0) {
        kb = std::atoll(line + n);
        break;
      }
    std::fclose(f);
    return static_cast<int64_t>(kb);
  }
  bool m_cuda;
  c10::DeviceIndex m_device;
  int64_t m_start = 0;
};

class TorchEvaluator final : public Evaluator {
 public:
  explicit TorchEvaluator(const Options& opt) : m_opt(opt) {
    m_cpu = make_cpu_device();
#if defined(FORGE_WORKER_CUDA)
    bool cuda_ok = at::hasCUDA();
#else
    bool cuda_ok = false;
#endif
    if (opt.backend == "cuda" && !cuda_ok) {
#if defined(FORGE_WORKER_CUDA)
      throw std::runtime_error("--backend cuda: torch sees no CUDA device");
#else
      throw std::runtime_error("--backend cuda: this worker was built without CUDA support");
#endif
    }
    if (opt.backend != "cpu" && opt.backend != "cuda" && opt.backend != "auto")
      throw std::runtime_error("--backend must be cpu, cuda or auto");
    m_backend = (opt.backend == "cuda" || (opt.backend == "auto" && cuda_ok)) ? "cuda" : "cpu";
#if defined(FORGE_WORKER_CUDA)
    if (m_backend == "cuda") {
      m_cuda = make_cuda_device(opt.device_index);
      // Torch's work (fills, the reference, comparisons, the stock kernel's
      // timing) runs on the legacy default stream, as the runner times the
      // candidate on it (runner_main.cpp): one event mechanism for both.
      const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
      impl->setDevice(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(opt.device_index)));
      m_stream = nullptr;
    }
#endif
    m_runner_exe = runner_path();
    if (::access(m_runner_exe.c_str(), X_OK) != 0)
      throw std::runtime_error("the candidate runner " + m_runner_exe + " is missing");
    pool(m_backend == "cuda");  // the first runner starts now
    if (opt.ceiling > 0) {
      m_ceiling[m_backend] = opt.ceiling;
    } else {
      ceiling(m_backend);
    }
  }

  json hello() override {
    json h;
    h["hello"] = "forge_worker";
    h["abi"] = FORGE_ABI_VERSION;
    h["torch"] = TORCH_VERSION;
    h["backend"] = m_backend;
    h["device"] = device(m_backend).name();
    h["ceiling_bytes_per_s"] = ceiling(m_backend);
    h["threads"] = at::get_num_threads();
    h["cuda"] = m_cuda != nullptr;
    h["sandbox"] = "runner+seccomp";
    h["pid"] = static_cast<int64_t>(::getpid());
    return h;
  }

  Outcome evaluate(const json& req) override {
    try {
      return evaluate_impl(req);
    } catch (const c10::Error& e) {
      throw RequestError(one_line(e.what_without_backtrace()));
    } catch (const json::exception& e) {
      throw RequestError(std::string("malformed request: ") + e.what());
    }
  }

 private:
  Device& device(const std::string& backend) { return backend == "cuda" ? *m_cuda : *m_cpu; }

  RunnerPool& pool(bool cuda) {
    auto& p = m_pools[cuda];
    if (!p) p = std::make_unique<RunnerPool>(m_runner_exe, cuda, m_opt.device_index);
    return *p;
  }

  double ceiling(const std::string& backend) {
    auto it = m_ceiling.find(backend);
    if (it != m_ceiling.end()) return it->second;
    double c = backend == "cuda" ? m_cuda->copy_ceiling() : cpu_copy_ceiling();
    m_ceiling[backend] = c;
    std::fprintf(stderr, "forge_worker: %s copy ceiling %.3g bytes/s\n", backend.c_str(), c);
    return c;
  }

  // Best of 5 copies of a 256 MiB tensor with torch's intra-op threads.
  static double cpu_copy_ceiling() {
    const int64_t bytes = int64_t(256) << 20;
    at::Tensor src = at::empty({bytes / 4}, at::kFloat).fill_(1.0);
    at::Tensor dst = at::empty({bytes / 4}, at::kFloat).fill_(0.0);
    dst.copy_(src);
    double best = 0;
    for (int i = 0; i < 5; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      dst.copy_(src);
      double s = seconds_since(t0);
      if (s > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / s);
    }
    return best;
  }

  // The CPU arena is sparse: a large capacity costs only the pages written.
  // A CUDA arena is memory held: the memory plan's candidate-visible part
  // (memory_plan.h), grown on a retry, never past the plan's limit.
  static int64_t arena_capacity(const OpSpec& spec, const MemoryPlan& mem, int attempt) {
    if (!spec.cuda) return int64_t(64) << 30;
    return std::min(mem.arena_bytes << attempt, std::max(mem.limit_bytes, mem.arena_bytes));
  }

  // An arena too small is grown; a device that runs out of memory anyway
  // (another process took some, or the plan's model fell short) gets the
  // evaluation again, planned for 60% of the free memory, then 36%.
  Outcome evaluate_impl(const json& req) {
    int attempt = 0, squeeze = 0;
    for (;;) {
      try {
        return evaluate_once(req, attempt, squeeze);
      } catch (const ArenaFull& e) {
        if (attempt >= 3) throw RequestError(e.what());
        ++attempt;
        std::fprintf(stderr, "forge_worker: %s; retrying with a larger arena\n", e.what());
      } catch (const c10::OutOfMemoryError& e) {
        plan_with_less(squeeze, "out of device memory: " + one_line(e.what_without_backtrace()));
      } catch (const ArenaAllocationFailed& e) {
        plan_with_less(squeeze, e.what());
      }
    }
  }

  // After running out of device memory: the next attempt plans for 60% of the
  // free memory the last one planned for; after two, the evaluation ends with `why`.
  static void plan_with_less(int& squeeze, const std::string& why) {
    if (squeeze >= 2) throw RequestError(why + " (planned for 36% of the free memory)");
    ++squeeze;
    std::fprintf(stderr, "forge_worker: %s; planning again with less\n", why.c_str());
  }

  Outcome evaluate_once(const json& req, int attempt, int squeeze) {
    auto t_start = std::chrono::steady_clock::now();
    json id = req.contains("id") ? req["id"] : json();
    if (!req.contains("candidate") || !req["candidate"].is_string()) throw RequestError("\"candidate\" must be a path");
    const std::string path = req["candidate"].get<std::string>();
    if (req.contains("chain")) register_chain(req);  // a chain target: its stock reference is an op too
    OpSpec spec = parse_op(req, m_cuda != nullptr);
    const json family_json = req.contains("family") ? req["family"] : json();
    Family family = parse_family(family_json);
    json samples = req.contains("samples") ? req["samples"] : json::array();
    if (!samples.is_array()) throw RequestError("\"samples\" must be an array");
    std::string samples_dir = req.value("samples_dir", std::string());
    sample_int_ranges(spec, samples, samples_dir, family);
    uint64_t seed = req.contains("seed") && req["seed"].is_number_integer() ? req["seed"].get<uint64_t>() : 0;
    json bench_req = req.contains("bench") ? req["bench"] : json::object();
    if (!bench_req.is_object()) throw RequestError("\"bench\" must be an object");
    const double call_timeout = req.value("call_timeout_seconds", 60.0);
    // "race": the candidate passed a full evaluation before (docs/WORKER.md,
    // "Races"); this one checks the first case only, then benchmarks, every
    // timed call still checked. Its reply ranks kernels; it verifies nothing.
    const std::string mode = req.value("mode", std::string("evaluate"));
    if (mode != "evaluate" && mode != "race") throw RequestError("\"mode\" must be \"evaluate\" or \"race\"");
    Device& dev = device(spec.cuda ? "cuda" : "cpu");
    void* stream = spec.cuda ? m_stream : nullptr;

    std::vector<std::string> notes;
    json verify_record = json{{"cases", 0}};
    Outcome out;
    out.reply["id"] = id;
    json bench;
    double verify_seconds = -1, bench_start = -1;  // stage costs (docs/PERF.md)
    json phases;  // the judge's phases (judge.h, Phases)
    json memory;  // the memory plan and what was held (memory_plan.h)
    auto finish = [&](const std::string& verdict, const std::string& reason, const std::string& detail) {
      out.reply["verdict"] = verdict;
      out.reply["reason"] = reason;
      out.reply["detail"] = one_line(detail);
      if (verify_seconds >= 0) verify_record["seconds"] = verify_seconds;
      out.reply["verify"] = verify_record;
      if (!bench.is_null()) {
        bench["seconds"] = seconds_since(t_start) - bench_start;
        out.reply["bench"] = bench;
      }
      if (!notes.empty()) out.reply["notes"] = notes;
      if (mode == "race") out.reply["mode"] = mode;
      if (!phases.is_null()) out.reply["phase_seconds"] = phases;
      if (!memory.is_null()) out.reply["memory"] = memory;
      out.reply["seconds"] = seconds_since(t_start);
      return out;
    };

    if (!spec.abi_problem.empty()) return finish("rejected", "abi_mismatch", spec.abi_problem);

    // What this evaluation may hold (memory_plan.h), from the device's free
    // memory now; a call too large to verify here is refused before anything
    // is allocated.
    MemoryNeeds needs = memory_needs(spec);
    needs.free_bytes = static_cast<int64_t>(static_cast<double>(dev.free_bytes()) * std::pow(0.6, squeeze));
    const MemoryPlan mem = plan_memory(needs);
    if (!mem.refused.empty()) throw MemoryRefused("not enough memory to evaluate " + spec.name + ": " + mem.refused);
    if (squeeze > 0)
      notes.push_back("memory: ran out of device memory; planned again for " +
                      std::to_string(squeeze == 1 ? 60 : 36) + "% of the free memory");
    for (const auto& n : mem.notes) notes.push_back(n);
    memory = {{"io_bytes", mem.io_bytes}, {"limit_bytes", mem.limit_bytes}, {"planned_bytes", mem.need_bytes},
              {"free_bytes", needs.free_bytes}, {"bench_copies", mem.bench_copies},
              {"arena_planned_bytes", mem.arena_bytes}};

    std::vector<CasePlan> plans = plan_cases(spec, samples, family, seed, notes, mem.sweep_growth);
    if (plans.empty()) throw RequestError("no verification cases: no samples and no family.verify.ranges");

    // A fast first filter; the runner's sandbox does not depend on it.
    if (m_opt.import_check)
      if (auto why = check_imports(path)) return finish("rejected", why->reason, why->detail);

    PrivateCopy copy;
    {
      static int serial = 0;
      const char* tmp = std::getenv("TMPDIR");
      copy.path = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
                  ("forge_candidate." + std::to_string(::getpid()) + "." + std::to_string(serial++) + ".so");
      std::error_code ec;
      std::filesystem::copy_file(path, copy.path, std::filesystem::copy_options::overwrite_existing, ec);
      if (ec) return finish("rejected", "bad_candidate", "cannot read " + path + ": " + ec.message());
    }

    // The exchange arena, then the runner: attach, load (sandboxed).
    std::unique_ptr<Arena> arena;
#if defined(FORGE_WORKER_CUDA)
    arena = spec.cuda ? make_cuda_arena(arena_capacity(spec, mem, attempt), m_opt.device_index)
                      : make_cpu_arena(arena_capacity(spec, mem, attempt));
#else
    arena = make_cpu_arena(arena_capacity(spec, mem, attempt));
#endif
    HeldMemory held(spec.cuda, m_opt.device_index);
    std::mt19937_64 rng(seed ^ (static_cast<uint64_t>(::getpid()) << 20) ^
                        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
    set_guard_byte(static_cast<uint8_t>(0x81 + rng() % 0x7D));  // 0x81..0xFD: no 0, 0xFF or ASCII
    std::unique_ptr<Runner> runner = pool(spec.cuda).take();
    {
      RunnerResult a = runner->attach(*arena, 60);
      if (!a.ok) return finish("rejected", a.reason, a.detail + " (attaching the arena)");
      if (a.reply.status != runner::Status::Ok)
        throw std::runtime_error("the runner could not map the arena: " + std::string(a.reply.text));
    }
    RunnerResult loaded = runner->load(copy.path.string(), call_timeout);
    if (!loaded.ok) return finish("rejected", loaded.reason, loaded.detail + " (loading the candidate)");
    if (loaded.reply.status == runner::Status::Refused)
      return finish("rejected", loaded.reply.reason, loaded.reply.text);
    if (loaded.reply.status != runner::Status::Ok)
      return finish("rejected", "bad_candidate", std::string("loading failed: ") + loaded.reply.text);

    std::optional<c10::ScalarType> in_dtype;
    for (const auto& a : spec.args)
      if (a.kind == ArgKind::Tensor && at::isFloatingType(a.dtype)) {
        in_dtype = a.dtype;
        break;
      }
    std::optional<Failure> failed;
    {
      ArenaScope scope(arena.get());
      Session session(*runner, *arena, dev, stream, call_timeout, loaded.reply.threads);
      Judge judge{spec,  family,
                  family_json,
                  samples,
                  samples_dir,
                  session,
                  dev,
                  stream,
                  notes,
                  verify_record,
                  std::mt19937_64(rng()),
                  in_dtype,
                  Phases(dev, stream),
                  mem};
      const double verify_start = seconds_since(t_start);
      {
        // The judge's torch work during verification on one thread: idle
        // OpenMP threads spin and take the cores the runner's call threads
        // need. On the CPU each call then waits for a time slice; on the H200
        // (16 cores) 16 threads gave 51 evaluations per minute where one gave
        // 58 (bench/results/2026-12-05_fed9343_h200_runner_check.json).
        // Restored also when verification throws (out of memory: the retry
        // and later evaluations read the thread count as set before).
        struct OneThread {
          int saved = at::get_num_threads();
          OneThread() { at::set_num_threads(1); }
          ~OneThread() {
            if (at::get_num_threads() != saved) at::set_num_threads(saved);
          }
        } one_thread;
        if (mode == "race") {
          failed = verify_cases(judge, {plans.front()});
        } else {
          failed = verify_cases(judge, plans);
          judge.phases.enter("threads");
          if (!failed) failed = verify_concurrent_calls(judge, plans.front());
        }
      }
      verify_seconds = seconds_since(t_start) - verify_start;
      if (!failed) {
        bench_start = seconds_since(t_start);
        judge.phases.enter("bench");
        json timed;
        failed = benchmark(judge, plans.front(), bench_req, ceiling(spec.cuda ? "cuda" : "cpu"), timed);
        if (!failed) bench = timed;
      }
      judge.phases.enter(nullptr);
      phases = judge.phases.record();
      phases["setup"] = verify_start;
      const int64_t peak = arena->peak() + held.judge_peak();
      memory["arena_capacity_bytes"] = arena->capacity();
      memory["arena_peak_bytes"] = arena->peak();
      memory["judge_peak_bytes"] = held.judge_peak();
      memory["peak_multiple"] = mem.io_bytes > 0 ? static_cast<double>(peak) / static_cast<double>(mem.io_bytes) : 0.0;
    }
    // The runner's orderly end: a forged reply still queued, or an early
    // death, rejects the candidate even when every check passed.
    std::string ending = runner->alive() ? runner->finish(10) : std::string();
    std::string log = runner->log_tail(300);
    if (!log.empty()) notes.push_back("the candidate's output: " + log);
    if (failed) return finish("rejected", failed->reason, failed->detail);
    if (!ending.empty()) {
      const bool forged = ending.rfind("forbidden", 0) == 0;
      return finish("rejected", forged ? "forbidden" : "crashed", ending);
    }
    return finish("accepted", "ok", "verified on " + std::to_string(verify_record.value("cases", 0)) + " cases");
  }

  Options m_opt;
  std::string m_backend;
  std::unique_ptr<Device> m_cpu;
  std::unique_ptr<Device> m_cuda;
  void* m_stream = nullptr;
  std::string m_runner_exe;
  std::map<bool, std::unique_ptr<RunnerPool>> m_pools;
  std::map<std::string, double> m_ceiling;
};

}  // namespace

std::unique_ptr<Evaluator> make_evaluator(const Options& options) {
  return std::make_unique<TorchEvaluator>(options);
}

}  // namespace forge::worker
