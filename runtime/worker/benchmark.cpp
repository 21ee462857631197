// The benchmark (docs/WORKER.md, "Benchmark"): candidate and stock timed on the
// same fresh content per call, every timed call checked like a verified one,
// and the runner's clock checked against the judge's.
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include <ATen/Parallel.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <variant>

#include "accuracy_hook.h"
#include "judge.h"
#include "stats.h"

namespace forge::worker {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

bool has_broadcast(const at::Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) == 0 && t.size(d) > 1) return true;
  return false;
}

// Where fresh content comes from, per tensor input: a window at a random
// offset into `pool`, so every offset gives other values. Floating inputs:
// the case's values followed by `extra` others. For a captured case, its own
// values picked at random, each scaled by a factor in (1 - 1/64, 1): signs,
// magnitudes, zeros and specials as the model has them, since some stock
// kernels' time depends on the values (elu's exp only for negative inputs);
// scaled down only, so no value overflows. That needs 16 or more finite nonzero
// values (the ones scaling changes), an eighth of them at least, else windows
// could repeat and a candidate that caches its last output would pass;
// otherwise, and for a fresh case, random values of the case's range. Integer
// and bool inputs (indices, masks): the values twice over, so a window is a
// rotation and every value stays one the op accepts.
struct Content {
  at::Tensor pool;  // flat, judge-private
  int64_t numel = 0;
  int64_t offsets = 0;  // windows to choose from
};

Content content_for(const at::Tensor& t, const CasePlan& plan, uint64_t seed) {
  Content c;
  c.numel = t.numel();
  at::Tensor base = t.contiguous().reshape(-1).clone();
  if (at::isFloatingType(t.scalar_type())) {
    const int64_t extra = std::max<int64_t>(65536, std::min<int64_t>(c.numel, int64_t(1) << 20));
    at::Generator gen = at::globalContext().defaultGenerator(base.device());
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_current_seed(seed);
    }
    // Values the scaling changes (finite, nonzero): counted for captured cases only.
    auto live = [&] { return c.numel ? (base.isfinite() & (base != 0)).sum().item<int64_t>() : 0; };
    at::Tensor more;
    if (plan.kind == CasePlan::Sample && live() >= std::max<int64_t>(16, c.numel / 8)) {
      const auto wide = base.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
      at::Tensor pick = at::randint(c.numel, {extra}, gen, base.options().dtype(at::kLong));
      at::Tensor scale = at::empty({extra}, base.options().dtype(wide));
      scale.uniform_(1.0 - 1.0 / 64, 1.0, gen);
      more = (base.index_select(0, pick).to(wide) * scale).to(base.scalar_type());
    } else {
      more = at::empty({extra}, base.options());
      more.uniform_(plan.lo, plan.hi, gen);
    }
    c.pool = at::cat({base, more});
    c.offsets = extra + 1;
  } else {
    c.pool = at::cat({base, base});
    c.offsets = std::max<int64_t>(c.numel, 1);
  }
  return c;
}

struct Copy {
  Case c;
  CallSet cs;
};

}  // namespace

std::optional<Failure> benchmark(Judge& j, const CasePlan& plan, const json& req, double ceiling, json& out) {
  Session& s = j.session;
  const int warmup_base = req.value("warmup", 5);
  const int reps = req.value("reps", 30);
  const double min_seconds = req.value("min_seconds", 0.2);
  const double max_seconds = req.value("max_seconds", 10.0);
  const int copies = j.memory.bench_copies;
  // bench.threads: torch's intra-op threads for the stock CPU kernel during
  // the benchmark (default: as configured, all cores).
  struct ThreadsGuard {
    int saved = at::get_num_threads();
    ~ThreadsGuard() {
      if (at::get_num_threads() != saved) at::set_num_threads(saved);
    }
  } threads_guard;
  if (req.contains("threads") && req["threads"].is_number_integer() && req["threads"].get<int>() > 0)
    at::set_num_threads(req["threads"].get<int>());

  Case first = make_case(j.spec, plan, j.samples, j.samples_dir, j.family, /*guarded=*/false);
  std::vector<at::Tensor> shape_ref = call_stock(j.spec, first.args, true);
  std::vector<Content> content(first.buffers.size());
  // An argument the family keeps (verify.keep_args: a chain's eps) keeps its value in timed calls too.
  for (size_t i = 0; i < first.buffers.size(); ++i)
    if (first.buffers[i].t.defined() && !has_broadcast(first.buffers[i].t) &&
        std::find(j.family.keep_args.begin(), j.family.keep_args.end(), static_cast<int>(i)) == j.family.keep_args.end())
      content[i] = content_for(first.buffers[i].t, plan, plan.seed + 77 * i + 1);

  // The timed buffers are laid out as verified ones: guarded, in the arena.
  std::vector<Copy> set(copies);
  for (int k = 0; k < copies; ++k) {
    Case& c = set[k].c;
    c.plan = first.plan;
    c.specs = first.specs;
    for (size_t i = 0; i < first.buffers.size(); ++i) {
      if (first.buffers[i].t.defined()) {
        c.buffers.push_back(clone_buffer(first.buffers[i], true, c.guard));
        c.args.emplace_back(c.buffers.back().t);
      } else {
        c.buffers.emplace_back();
        c.args.push_back(first.args[i]);
      }
    }
    if (auto f = s.bind(set[k].cs, c, shape_ref, true)) return f;
  }
  int64_t bytes = 0;
  for (const auto& t : set[0].cs.inputs) bytes += tensor_bytes(t);
  for (const auto& b : set[0].cs.outputs) bytes += tensor_bytes(b.t);

  // Fresh content in copy k's inputs and fresh poison in its outputs; returns
  // the inputs as written, to check afterwards that the candidate left them.
  auto refresh = [&](int k) {
    Copy& cp = set[k];
    const uint64_t r = j.draw();
    std::vector<at::Tensor> written;
    for (size_t i = 0; i < cp.c.buffers.size(); ++i) {
      const at::Tensor& t = cp.c.buffers[i].t;
      if (!t.defined() || !content[i].pool.defined()) continue;
      const int64_t off = static_cast<int64_t>(r % static_cast<uint64_t>(content[i].offsets));
      t.copy_(content[i].pool.narrow(0, off, content[i].numel).view(t.sizes()));
    }
    for (const auto& t : cp.cs.inputs) written.push_back(t.defined() ? t.clone() : at::Tensor());
    for (auto& o : cp.cs.outputs) poison(o.t, j.draw());
    if (cp.cs.workspace.t.defined()) cp.cs.workspace.t.fill_(static_cast<int64_t>(j.draw() & 0xFF));
    return written;
  };
  auto flush = [&]() {
    j.dev.flush_caches(j.stream);
    // Wake torch's intra-op threads, untimed, before both contestants alike:
    // waking a sleeping thread costs milliseconds on small VMs, a cost a
    // model whose ops run back to back does not pay.
    if (!j.spec.cuda && at::get_num_threads() > 1)
      at::parallel_for(0, at::get_num_threads(), 1, [](int64_t, int64_t) {});
    j.dev.synchronize(j.stream);
  };
  // Stock changes the inputs the call changes (op_spec.h) in copies, made
  // before the clock starts: the candidate reads the same inputs after it.
  auto time_stock = [&](Copy& cp, std::vector<at::Tensor>& outs) {
    torch::jit::Stack st = cp.c.args;
    std::vector<at::Tensor> changed(st.size());
    for (int i : j.spec.changed)
      if (st[i].isTensor() && st[i].toTensor().defined()) st[i] = changed[i] = st[i].toTensor().clone();
    double us = j.dev.time_us(j.stream, [&] {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      j.spec.op->callBoxed(&st);
    });
    outs.clear();
    for (auto& v : st) outs.push_back(v.isTensor() ? v.toTensor() : at::Tensor());
    for (int i : j.spec.extra_outputs) outs.push_back(changed[i]);
    return us;
  };

  struct Timed {
    std::vector<double> us, rt;  // the runner's figure, the judge's round trip
  };
  int calls = 0;
  // One round: fresh content, both contestants in a random order (a flush
  // before each when cold), the candidate's outputs checked against stock's.
  auto round = [&](bool cold, bool keep, Timed& tc, std::vector<double>& te, Timed& nop) -> std::optional<Failure> {
    const int k = static_cast<int>(j.draw() % copies);
    Copy& cp = set[k];
    std::vector<at::Tensor> written = refresh(k);
    const bool stock_first = j.draw() & 1;
    std::vector<at::Tensor> stock_out;
    CallResult r;
    const std::string where = "on timed call " + std::to_string(++calls);
    for (int which = 0; which < 2; ++which) {
      if (cold) flush();
      if ((which == 0) == stock_first) {
        double us = time_stock(cp, stock_out);
        if (keep) te.push_back(us);
      } else {
        r = s.call(cp.cs, runner::Cmd::Call, true);
        bool dec = false;
        if (auto f = s.check(r, where, &dec)) return f;
        if (dec)
          return Failure{"declined", "forge_kernel returned " + std::to_string(r.reply.rc) + " " + where +
                                         " (the captured signature)"};
      }
    }
    if (auto d = [&]() -> std::optional<std::string> {
          for (size_t i = 0; i < cp.cs.inputs.size(); ++i)
            if (cp.cs.inputs[i].defined())
              if (auto diff = first_bit_difference(cp.cs.inputs[i], written[i])) return *diff;
          return std::nullopt;
        }())
      return Failure{"input_modified", "an input changed at " + *d + " " + where};
    for (size_t k2 = 0; k2 < cp.cs.outputs.size(); ++k2)
      if (auto off = damaged_guard(cp.cs.outputs[k2]))
        return Failure{"out_of_bounds", "the candidate wrote outside output " + std::to_string(k2) + " (byte offset " +
                                            std::to_string(*off) + ") " + where};
    CompareStats ignore;
    // The float64 outputs on these inputs, if an element needs its second
    // chance; not for an op that changes its inputs (the candidate's call
    // changed them), nor for a device output above kHostCompareLimit (its
    // float64 copy is outside the memory plan).
    std::function<std::vector<at::Tensor>()> later64;
    if (j.spec.changed.empty() && small_for_float64(stock_out))
      later64 = [&] { return reference_float64(j.spec, cp.c.args); };
    if (auto f = check_results(j, cp.cs, stock_out, {}, where, ignore, nullptr, later64))
      return Failure{f->reason, f->detail + " (its timed output differs from a checked one)"};
    if (keep) {
      tc.us.push_back(r.reply.us);
      tc.rt.push_back(r.round_trip_us);
    }
    // The judge's measure of the overhead around a call: the same request
    // without the kernel, in the same conditions, every other round.
    if (keep && (calls % 2 == 0)) {
      if (cold) flush();
      CallResult n = s.call(cp.cs, runner::Cmd::Nop, true);
      bool dec = false;
      if (auto f = s.check(n, where + " (an empty call)", &dec)) return f;
      nop.us.push_back(n.reply.us);
      nop.rt.push_back(n.round_trip_us);
    }
    return std::nullopt;
  };

  // Warm-up: a call count drawn at random, so the first timed call is not at
  // a position the candidate could count to.
  const int warmup = warmup_base + static_cast<int>(j.draw() % static_cast<uint64_t>(warmup_base + 1));
  Timed unused_c, unused_n;
  std::vector<double> unused_e;
  for (int i = 0; i < warmup; ++i)
    if (auto f = round(true, false, unused_c, unused_e, unused_n)) return f;

  // The cold measurement: reps rounds, at least min_seconds.
  Timed tc, nop;
  std::vector<double> te;
  auto measure = [&]() -> std::optional<Failure> {
    tc = Timed{};
    nop = Timed{};
    te.clear();
    const auto t0 = std::chrono::steady_clock::now();
    for (int n = 0;; ++n) {
      double elapsed = seconds_since(t0);
      if ((n >= reps && elapsed >= min_seconds) || elapsed >= max_seconds || n >= 1000000) break;
      if (auto f = round(true, true, tc, te, nop)) return f;
    }
    return std::nullopt;
  };

  // The runner's clock against the judge's: the judge's round trip less the
  // runner's figure is the overhead around the call; it must match the
  // overhead of the empty calls, or the runner under-reported (a tampered
  // timer, work the runner's clock did not see).
  struct ClockCheck {
    double low_c = 0, low_n = 0, excess = 0, limit = 0;
  };
  auto clock_check = [&]() -> std::variant<Failure, ClockCheck> {
    std::vector<double> over_c, over_n;
    for (size_t i = 0; i < tc.us.size(); ++i) {
      if (!(tc.us[i] >= 0) || tc.us[i] > tc.rt[i] * 1.01 + 1.0)
        return Failure{"timing_mismatch", "the runner reported " + std::to_string(tc.us[i]) +
                                              " us for a call the judge saw take " + std::to_string(tc.rt[i]) + " us"};
      over_c.push_back(tc.rt[i] - tc.us[i]);
    }
    for (size_t i = 0; i < nop.us.size(); ++i) over_n.push_back(nop.rt[i] - nop.us[i]);
    ClockCheck k;
    // Low percentiles, not medians: a busy machine only ever adds to the
    // overhead of a call, so its low end is stable where its middle is not.
    k.low_c = percentile(over_c, 0.10);
    k.low_n = percentile(over_n, 0.10);
    k.excess = over_n.empty() ? 0.0 : k.low_c - k.low_n;
    // The two overheads are measured in alternating requests, but not in the
    // same state (which core woke, what the flush left cached): their low ends
    // differ by up to a fifth of the overhead itself from one evaluation to
    // the next on a loaded 2-core VM, so the limit scales with the overhead as
    // well as the call. CPU: half the overhead, whose low end moves by up to
    // about a third of it between requests; CUDA's overhead is steadier.
    const double floor_us = j.spec.cuda ? 15.0 : 25.0;
    const double overhead_share = j.spec.cuda ? 0.25 : 0.5;
    k.limit = std::max({floor_us, 0.25 * summarize(tc.us).median, overhead_share * std::max(k.low_n, 0.0)});
    return k;
  };

  if (auto f = measure()) return f;
  auto checked = clock_check();
  // An excess over the limit is measured again, once, from scratch: a runner
  // that under-reports does so in every measurement, while a machine busy
  // with other work disturbs one measurement's low end, not two in a row
  // (the suite's timer cheats fail both). The second measurement decides.
  std::optional<double> first_excess;
  if (auto* k = std::get_if<ClockCheck>(&checked); k && k->excess > k->limit) {
    first_excess = k->excess;
    if (auto f = measure()) return f;
    checked = clock_check();
  }
  if (auto* f = std::get_if<Failure>(&checked)) return *f;
  const ClockCheck clock = std::get<ClockCheck>(checked);
  Summary c = summarize(tc.us), e = summarize(te);
  if (clock.excess > clock.limit)
    return Failure{"timing_mismatch", "the judge's clock saw " + std::to_string(clock.excess) +
                                          " us more per call than the runner reported, twice (first " +
                                          std::to_string(*first_excess) + " us; median " + std::to_string(c.median) +
                                          " us; allowed " + std::to_string(clock.limit) +
                                          " us): work the runner's timer did not see, or a tampered timer"};

  // Hot inputs: no flush, the inputs just written, as in a model where the
  // previous op wrote them. Reported beside the cold figures, not judged.
  Timed hc, hnop;
  std::vector<double> he;
  const auto t_hot = std::chrono::steady_clock::now();
  for (int n = 0; n < std::max(6, reps / 3) && seconds_since(t_hot) < max_seconds / 4; ++n)
    if (auto f = round(false, true, hc, he, hnop)) return f;

  // Below that, the excess (less 1 us of clock granularity) is added to the
  // candidate's figures: an under-reported time gains nothing.
  const double correction = std::max(0.0, clock.excess - 1.0);
  std::vector<double> corrected = tc.us;
  for (double& us : corrected) us += correction;
  c = summarize(corrected);
  const FasterDecision faster = decide_faster(corrected, te);

  auto stat = [](const Summary& x) {
    return json{{"median", x.median}, {"spread", x.iqr}, {"q1", x.q1}, {"q3", x.q3}, {"min", x.min}, {"reps", x.reps}};
  };
  auto floor_pct = [&](double us) { return ceiling > 0 && us > 0 ? (bytes / ceiling) / (us * 1e-6) * 100.0 : 0.0; };
  out = json::object();
  out["candidate_us"] = stat(c);
  out["eager_us"] = stat(e);
  out["speedup_eager"] = c.median > 0 ? e.median / c.median : 0.0;
  out["faster"] = faster.faster;
  out["faster_test"] = {{"wins", faster.wins}, {"rounds", faster.rounds}, {"p", faster.p},
                        {"min_effect", FasterRule{}.min_effect}, {"alpha", FasterRule{}.alpha}};
  out["bytes"] = bytes;
  out["floor_pct"] = floor_pct(c.median);
  out["eager_floor_pct"] = floor_pct(e.median);
  out["ceiling_bytes_per_s"] = ceiling;
  if (!hc.us.empty()) {
    const Summary h = summarize(hc.us), he_s = summarize(he);
    out["hot"] = {{"candidate_us", stat(h)},
                  {"eager_us", stat(he_s)},
                  {"speedup_eager", h.median > 0 ? he_s.median / h.median : 0.0}};
  }
  out["checked_calls"] = calls;
  out["clock_check"] = {{"call_overhead_p10_us", clock.low_c}, {"empty_call_overhead_p10_us", clock.low_n},
                        {"excess_us", clock.excess},           {"correction_us", correction},
                        {"rejected_above_us", clock.limit}};
  if (first_excess) out["clock_check"]["first_excess_us"] = *first_excess;
  out["timing"] = j.spec.cuda ? "cuda_events" : "steady_clock";
  out["case"] = plan.name;
  out["threads"] = at::get_num_threads();
  return std::nullopt;
}

}  // namespace forge::worker
