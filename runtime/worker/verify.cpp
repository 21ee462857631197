// Verification (docs/WORKER.md, "Verification cases"): every case runs the
// candidate several times, each run followed by named checks. A check either
// passes or returns the Failure that rejects the candidate.
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include <algorithm>
#include <random>

#include "accuracy_hook.h"
#include "judge.h"

namespace forge::worker {

// results: every output matches the reference (and, where the op has a
// float64 path, is no less accurate than stock).
std::optional<Failure> check_results(Judge& j, const CallSet& cs, const std::vector<at::Tensor>& ref,
                                     const std::vector<at::Tensor>& ref64, const std::string& where,
                                     CompareStats& stats, json* accuracy,
                                     const std::function<std::vector<at::Tensor>()>& later64) {
  const bool multi = ref.size() > 1;
  // The family's compare_float64 (compare.h): the float64 outputs, ref64 or,
  // without it, later64's, made only if some element needs them.
  const bool second_chance = j.family.compare_float64;
  std::optional<std::vector<at::Tensor>> made64;
  auto float64_output = [&](size_t k) -> at::Tensor {
    if (k < ref64.size()) return ref64[k];
    if (!later64) return at::Tensor();
    if (!made64) made64 = later64();
    return k < made64->size() ? (*made64)[k] : at::Tensor();
  };
  for (size_t k = 0; k < ref.size(); ++k) {
    std::string label;
    const auto& returns = j.spec.op->schema().returns();
    if (k >= returns.size()) {  // a changed input's new value (compare.h, call_stock)
      const auto& a = j.spec.args[static_cast<size_t>(j.spec.extra_outputs[k - returns.size()])];
      label = "output " + std::to_string(k) + " (the new value of input " + a.name + ", which the call changes)";
    } else if (multi) {
      const std::string& n = returns[k].name();
      label = "output " + std::to_string(k) + (n.empty() ? "" : " (" + n + ")");
    }
    if (!ref[k].defined()) continue;
    Tolerance tol = tolerance_for(j.family, ref[k].scalar_type(), j.in_dtype);
    const char* outer = j.phases.current();
    j.phases.enter("compare");
    const bool float64 = k < ref64.size() && ref64[k].defined();
    // Both checks read a small output and its reference on the host: a device
    // pair is copied once for the two (each copy synchronizes). A large one
    // stays on the device (compare.h, kHostCompareLimit): compared there in
    // full, and checked against float64 on a window at a random offset, drawn
    // per call, so no region of the output is safe from it.
    const bool large = !ref[k].is_cpu() && ref[k].numel() > kHostCompareLimit;
    const bool share = float64 && !ref[k].is_cpu() && !large;
    const at::Tensor out = share ? cs.outputs[k].t.cpu() : cs.outputs[k].t;
    const at::Tensor stock = share ? ref[k].cpu() : ref[k];
    std::function<at::Tensor()> second;
    if (second_chance) second = [&float64_output, k] { return float64_output(k); };
    const double factor64 = second_chance ? float64_factor(j.family_json, ref[k].scalar_type()) : 0;
    // The envelope (Judge::envelope64): measured where a large output has its
    // float64 reference, the bound where it has none.
    const auto envelope_key = std::make_pair(k, ref[k].sizes().vec());
    std::string widened;
    if (large && factor64 > 0 && float64) {
      double& e = j.envelope64[envelope_key];
      e = std::max(e, (factor64 + 1) * stock_error64(ref[k], ref64[k]));
    } else if (large && factor64 > 0 && !later64) {
      if (auto it = j.envelope64.find(envelope_key); it != j.envelope64.end()) {
        tol.atol += it->second;
        widened = " (no float64 evaluation fits at this size: atol widened by " + number_text(it->second) +
                  ", the envelope of stock's error measured in verification)";
      }
    }
    if (auto m = compare_to_reference(out, stock, tol, label, where + widened, stats, second, factor64))
      return Failure{m->reason, m->detail};
    j.phases.enter("accuracy");
    if (float64) {
      int64_t first = 0, count = -1;
      if (large) {
        count = kHostCompareLimit;
        first = std::uniform_int_distribution<int64_t>(0, ref[k].numel() - count)(j.rng);
      }
      if (auto m = accuracy_against_float64(j.family, j.family_json, out, stock, ref64[k], label, where, accuracy,
                                            first, count))
        return Failure{m->reason, m->detail};
    }
    j.phases.enter(outer);
  }
  return std::nullopt;
}

namespace {

// Declines: allowed off the captured signature, up to the family's
// verify.max_declined share of those cases (default half): a kernel that
// handles little beyond the captured call would ship a package that falls
// back to stock nearly everywhere the family promises it.
std::optional<Failure> too_many_declines(const Judge& j, const std::vector<CasePlan>& plans, int declined) {
  if (declined == 0) return std::nullopt;
  double share = 0.5;
  if (j.family_json.is_object() && j.family_json.contains("verify") && j.family_json["verify"].is_object()) {
    const json& v = j.family_json["verify"];
    if (v.contains("max_declined") && v["max_declined"].is_number()) share = v["max_declined"].get<double>();
  }
  int off = 0;
  for (const CasePlan& p : plans) off += p.kind != CasePlan::Sample && p.kind != CasePlan::Fresh;
  if (declined <= share * off) return std::nullopt;
  return Failure{"declined", "forge_kernel declined " + std::to_string(declined) + " of the " + std::to_string(off) +
                                 " cases off the captured signature; the family allows " +
                                 std::to_string(static_cast<int>(share * 100 + 0.5)) + "% (verify.max_declined)"};
}

// The size sweep's small extents (1..64) run once each, except kFullSmall of
// them drawn per evaluation; every other case runs the whole protocol. Runs
// 2-4 and the graph replay look for behaviour that pays only on repeated
// calls at one address (a cache, a stream left running), which the timed
// calls make at the captured size alone, and that size always gets them; a
// kernel wrong at a small size is wrong in run 1 too (every case has fresh
// content). Cuts a CUDA evaluation's calls by about two thirds.
constexpr int kFullSmall = 8;

std::vector<bool> full_protocol(Judge& j, const std::vector<CasePlan>& plans) {
  std::vector<bool> full(plans.size(), true);
  std::vector<size_t> small;
  for (size_t i = 0; i < plans.size(); ++i)
    if (plans[i].kind == CasePlan::Edge && plans[i].edge_size <= 64) small.push_back(i);
  std::shuffle(small.begin(), small.end(), j.rng);
  for (size_t k = kFullSmall; k < small.size(); ++k) full[small[k]] = false;
  return full;
}

}  // namespace

std::optional<Failure> verify_cases(Judge& j, const std::vector<CasePlan>& plans) {
  Session& s = j.session;
  int done = 0, skipped = 0, declined = 0;
  double worst_tol = -1;
  CompareStats total;
  std::string worst_case;
  json accuracy = json::object();
  // The largest extent verified per signature_family.vary entry (the package's
  // bound); the captured extent counts as verified by the samples.
  std::vector<int64_t> vary_max(j.family.sig.vary.size(), 0);
  for (size_t v = 0; v < j.family.sig.vary.size(); ++v) {
    const auto [arg, dim] = j.family.sig.vary[v];
    if (arg >= 0 && static_cast<size_t>(arg) < j.spec.args.size() && j.spec.args[arg].kind == ArgKind::Tensor) {
      const auto& sizes = j.spec.args[arg].sizes;
      const int64_t d = dim < 0 ? dim + static_cast<int64_t>(sizes.size()) : dim;
      if (d >= 0 && d < static_cast<int64_t>(sizes.size())) vary_max[v] = sizes[static_cast<size_t>(d)];
    }
  }
  auto record = [&]() {
    j.record["cases"] = done;
    j.record["skipped"] = skipped;
    j.record["declined"] = declined;
    j.record["worst_abs"] = total.worst_abs;
    j.record["worst_rel"] = total.worst_rel;
    j.record["worst_tol"] = std::max(worst_tol, 0.0);
    j.record["worst_case"] = worst_case;
    j.record["vary_max"] = vary_max;
    if (!accuracy.empty()) j.record["accuracy"] = accuracy;
  };
  record();
  json case_log = json::array();
  // A case passed after `runs` calls: its extent verified, its error counted.
  auto note_passed = [&](const Case& c, const CompareStats& cs, int runs) {
    const CasePlan& plan = c.plan;
    if (plan.kind == CasePlan::Edge && plan.edge_vary >= 0 && static_cast<size_t>(plan.edge_vary) < vary_max.size())
      vary_max[static_cast<size_t>(plan.edge_vary)] =
          std::max(vary_max[static_cast<size_t>(plan.edge_vary)], plan.edge_size);
    total.worst_abs = std::max(total.worst_abs, cs.worst_abs);
    total.worst_rel = std::max(total.worst_rel, cs.worst_rel);
    if (cs.worst_tol > worst_tol) {
      worst_tol = cs.worst_tol;
      worst_case = plan.name;
    }
    json entry = {{"case", plan.name}, {"result", "ok"}, {"runs", runs}};
    if (plan.kind == CasePlan::Sample) entry["inputs"] = c.origin;
    case_log.push_back(std::move(entry));
    record();
  };
  const std::vector<bool> full = full_protocol(j, plans);

  for (size_t pi = 0; pi < plans.size(); ++pi) {
    const CasePlan& plan = plans[pi];
    const std::string on = "on case " + plan.name;
    Case c;
    std::vector<at::Tensor> ref;
    std::string skip;  // why an edge case is left out
    try {
      j.phases.enter("case");
      c = make_case(j.spec, plan, j.samples, j.samples_dir, j.family, /*guarded=*/true);
      j.phases.enter("stock");
      ref = call_stock(j.spec, c.args, /*clone_inputs=*/true);
    } catch (const c10::OutOfMemoryError&) {
      // A size-sweep case can outgrow the plan (outputs that grow faster than
      // the varied argument). Any other case is planned again with less
      // (evaluate.cpp).
      if (plan.kind != CasePlan::Edge) throw;
      skip = "out of device memory at this size";
    } catch (const c10::Error& e) {
      if (plan.kind != CasePlan::Edge) throw;
      // An edge size the op itself refuses (another argument shares the dim).
      skip = "the stock kernel refused it: " + one_line(e.what_without_backtrace());
    }
    if (!skip.empty()) {
      skipped++;
      j.notes.push_back("case " + plan.name + " skipped: " + skip);
      case_log.push_back({{"case", plan.name}, {"result", "skipped"}});
      record();
      continue;
    }
    if (auto problem = abi_problem_of_outputs(ref); !problem.empty()) return Failure{"abi_mismatch", problem};
    // A case of at least half the captured call's bytes, where the memory
    // plan gave up the float64 reference and the run at other addresses.
    int64_t case_bytes = 0;
    for (const auto& b : c.buffers) case_bytes += b.t.defined() ? b.extent : 0;  // as memory_needs counts inputs
    for (const auto& t : ref) case_bytes += tensor_bytes(t);
    const bool large = large_case(case_bytes, j.memory);
    const bool float64 = !large || j.memory.float64_large;
    const bool moved_run = !large || j.memory.moved_large;
    j.phases.enter("float64");
    std::vector<at::Tensor> ref64 = float64 ? reference_float64(j.spec, c.args) : std::vector<at::Tensor>{};

    j.phases.enter("bind");
    CallSet a;
    if (auto f = s.bind(a, c, ref, true)) return Failure{f->reason, f->detail + " " + on};
    std::vector<at::Tensor> in_before = snapshot(a.inputs);
    bool dec = false;

    // Run 1: the call's checks, guards, inputs, aliasing, results, late writes.
    j.phases.enter("calls");
    poison_call(j, a);
    CallResult r1 = s.call(a, runner::Cmd::Call, false);
    j.phases.enter("checks");
    if (auto f = s.check(r1, on, &dec)) return f;
    if (dec) {
      // A decline: allowed outside the captured signature (the package falls
      // back to stock there), never on it.
      if (plan.kind == CasePlan::Sample || plan.kind == CasePlan::Fresh)
        return Failure{"declined", "forge_kernel returned " + std::to_string(r1.reply.rc) + " " + on +
                                       ": a kernel must handle the signature it was captured with"};
      declined++;
      case_log.push_back({{"case", plan.name}, {"result", "declined"}, {"rc", r1.reply.rc}});
      record();
      continue;
    }
    if (auto f = check_guards(a, c, on)) return f;
    if (auto f = check_inputs(a, in_before, on)) return f;
    in_before.clear();  // the judge holds at most two snapshots (memory_plan.h)
    if (auto f = check_aliasing(a, on)) return f;
    CompareStats cs;
    if (auto f = check_results(j, a, ref, ref64, on, cs, &accuracy)) return f;
    ref64.clear();
    std::vector<at::Tensor> s1 = snapshot(a.outputs);
    if (auto d = outputs_differ(a, s1))
      return Failure{"side_stream", "outputs changed after the call returned: " + *d + " " + on +
                                        " (work on another stream or thread)"};
    if (!full[pi]) {
      j.phases.enter("checks");
      done++;
      note_passed(c, cs, 1);
      continue;
    }

    // Run 2: the same inputs again, poisoned differently: the same bits.
    j.phases.enter("calls");
    poison_call(j, a);
    CallResult r2 = s.call(a, runner::Cmd::Call, false);
    j.phases.enter("checks");
    if (auto f = s.check(r2, on + " (second run)", &dec)) return f;
    if (dec) return Failure{"nondeterministic", "forge_kernel declined a second run of a case it accepted " + on};
    if (auto d = outputs_differ(a, s1))
      return Failure{"nondeterministic", "a second run on the same inputs differs: " + *d + " " + on};

    // Run 3: new values written into the same input memory, right after two
    // calls on it: a result cached by address is stale now. (Before any call
    // at another address, so the cache's key is still this address: the
    // check does not depend on where later buffers happen to land.)
    {
      // The judge holds at most two case sizes (memory_plan.h): the first
      // reference goes back before the second is made (run 4 binds by the
      // second's shapes, the same), and the snapshots as soon as checked.
      ref.clear();
      j.phases.enter("case");
      refill_in_place(c, j.family, plan.seed ^ 0x9E3779B97F4A7C15ull);
      j.phases.enter("stock");
      ref = call_stock(j.spec, c.args, true);
      j.phases.enter("float64");
      std::vector<at::Tensor> ref2_64 = float64 ? reference_float64(j.spec, c.args) : std::vector<at::Tensor>{};
      j.phases.enter("calls");
      std::vector<at::Tensor> before3 = snapshot(a.inputs);
      poison_call(j, a);
      CallResult r3 = s.call(a, runner::Cmd::Call, false);
      j.phases.enter("checks");
      const std::string on3 = on + " after its inputs were rewritten in place";
      if (auto f = s.check(r3, on3, &dec)) return f;
      if (dec) return Failure{"nondeterministic", "forge_kernel declined " + on3};
      if (auto f = check_guards(a, c, on3)) return f;
      if (auto f = check_inputs(a, before3, on3)) return f;
      before3.clear();
      CompareStats ignore;
      if (auto f = check_results(j, a, ref, ref2_64, on3, ignore, &accuracy))
        return Failure{f->reason, f->detail + " (a result cached by address?)"};
      ref2_64.clear();
      s1.clear();
      s1 = snapshot(a.outputs);  // what runs 4 and the graph replay must reproduce
      if (!moved_run) ref.clear();
    }

    // Run 4: the same values at other addresses (the first set stays alive).
    if (moved_run) {
      j.phases.enter("bind");
      Case moved;
      moved.plan = c.plan;
      moved.specs = c.specs;
      moved.guard = c.guard;
      for (size_t i = 0; i < c.buffers.size(); ++i) {
        if (c.buffers[i].t.defined()) {
          moved.buffers.push_back(clone_buffer(c.buffers[i], true, c.guard));
          moved.args.emplace_back(moved.buffers.back().t);
        } else {
          moved.buffers.emplace_back();
          moved.args.push_back(c.args[i]);
        }
      }
      CallSet b;
      if (auto f = s.bind(b, moved, ref, true)) return Failure{f->reason, f->detail + " " + on};
      j.phases.enter("calls");
      poison_call(j, b);
      CallResult r4 = s.call(b, runner::Cmd::Call, false);
      j.phases.enter("checks");
      if (auto f = s.check(r4, on + " (inputs at other addresses)", &dec)) return f;
      if (dec) return Failure{"nondeterministic", "forge_kernel declined the case at other addresses " + on};
      if (auto f = check_guards(b, moved, on + " (inputs at other addresses)")) return f;
      if (auto d = outputs_differ(b, s1))
        return Failure{"nondeterministic", "the result depends on where the inputs live: " + *d + " " + on};
    }

    // CUDA: the call must be capturable in a CUDA graph on the given stream
    // (global capture mode fails on work on the legacy stream, device-wide
    // synchronization or allocation), and the replay must give the same bits.
    if (j.spec.cuda) {
      j.phases.enter("graph");
      poison_call(j, a);
      CallResult g = s.call(a, runner::Cmd::Graph, false);
      if (auto f = s.check(g, on + " (graph capture)", &dec)) return f;
      std::string err(g.reply.text, strnlen(g.reply.text, sizeof g.reply.text));
      if (!err.empty()) return Failure{"side_stream", err + " " + on};
      if (dec) return Failure{"nondeterministic", "forge_kernel declined during graph capture " + on};
      // Poisoned again: what ran eagerly during the capture (work on another
      // stream) is not in the replay.
      poison_call(j, a);
      CallResult rp = s.call(a, runner::Cmd::Replay, false);
      if (auto f = s.check(rp, on + " (graph replay)", &dec)) return f;
      err.assign(rp.reply.text, strnlen(rp.reply.text, sizeof rp.reply.text));
      if (!err.empty()) return Failure{"side_stream", err + " " + on};
      if (auto d = outputs_differ(a, s1))
        return Failure{"side_stream", "the CUDA graph replay did not give the call's results: " + *d + " " + on +
                                          " (work outside the given stream)"};
    }

    j.phases.enter("checks");
    done++;
    note_passed(c, cs, (j.spec.cuda ? 5 : 4) - (moved_run ? 0 : 1));
  }
  j.record["case_list"] = case_log;
  return too_many_declines(j, plans, declined);
}

}  // namespace forge::worker
