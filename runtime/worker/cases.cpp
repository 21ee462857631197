// The worker's case planning (cases.h): the plans in protocol order, and the
// inputs of each.
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include "cases.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "../common/sample_part.h"
#include "compare.h"
#include "op_args_detail.h"

namespace forge::worker {
namespace {

// The guard around each buffer of an edge case, whose sizes differ from the
// captured call's: as large as the largest buffer (a kernel reading the
// captured extent lands in it), up to 256 MiB.
int64_t edge_guard_bytes(int64_t largest) { return std::min<int64_t>(largest + kGuardBytes, int64_t(256) << 20); }

using detail::bad;
using detail::contiguous;
using detail::distinct_view;
using detail::dtype_text;
using detail::extent_bytes;
using detail::fmt;

void fill_random(const at::Tensor& target, double lo, double hi, uint64_t seed, const Family& family, int arg) {
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
    auto range = family.arg_int_range.find(arg);
    auto [a, b] = range != family.arg_int_range.end() ? range->second : family.int_range;
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

// Elements of the tensor a sample entry's file holds: "stored_numel" for a
// partial sample (docs/CAPTURE.md, "Samples"), else all of them.
int64_t entry_stored_numel(const json& entry, int64_t numel) {
  if (!entry.contains("stored_numel")) return numel;
  const json& n = entry["stored_numel"];
  if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > numel)
    bad("sample entry's \"stored_numel\" must be an integer in [1, " + std::to_string(numel) + "]");
  return n.get<int64_t>();
}

// Fills `target` from the sample file; a partial sample's block is repeated
// (runtime/common/sample_part.h). Returns the elements the file held.
int64_t load_sample(at::Tensor& target, const ArgSpec& a, const json& entry, const std::string& samples_dir) {
  std::string path = resolve_sample_path(entry, samples_dir);
  const int64_t numel = c10::multiply_integers(a.sizes);
  const int64_t stored = entry_stored_numel(entry, numel);
  const int64_t elem = static_cast<int64_t>(c10::elementSize(a.dtype));
  const int64_t bytes = stored * elem;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) bad("cannot read sample file " + path);
  int64_t size = static_cast<int64_t>(in.tellg());
  if (size != bytes)
    bad("sample file " + path + " has " + std::to_string(size) + " bytes, expected " + std::to_string(bytes) +
        " for " + (stored < numel ? std::to_string(stored) + " of the elements of " : std::string()) +
        dtype_text(a.dtype) + c10::str(c10::IntArrayRef(a.sizes)));
  in.seekg(0);
  at::Tensor host = at::empty(a.sizes, at::TensorOptions().dtype(a.dtype).device(c10::kCPU));
  if (bytes > 0 && !in.read(static_cast<char*>(host.data_ptr()), bytes)) bad("cannot read sample file " + path);
  // Tiling: the filled prefix, a whole number of blocks, doubles until it covers the tensor.
  char* base = static_cast<char*>(host.data_ptr());
  for (int64_t filled = stored; filled < numel;) {
    const int64_t n = std::min(filled, numel - filled);
    std::memcpy(base + filled * elem, base, static_cast<size_t>(n * elem));
    filled += n;
  }
  at::Tensor dst = distinct_view(target);
  at::Tensor src = host;
  for (int64_t d = 0; d < target.dim(); ++d)
    if (target.stride(d) == 0 && target.size(d) > 1) src = src.narrow(d, 0, 1);
  dst.copy_(src);
  return stored;
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

}  // namespace

std::vector<CasePlan> plan_cases(const OpSpec& spec, const json& samples, const Family& family, uint64_t seed,
                                 std::vector<std::string>& notes, double sweep_growth) {
  std::vector<PlanArg> args;
  for (const auto& a : spec.args)
    args.push_back({a.name, a.kind == ArgKind::Tensor, a.sizes,
                    a.kind == ArgKind::Tensor ? static_cast<int64_t>(c10::elementSize(a.dtype)) : 0});
  return plan_cases(args, samples, family, seed, notes, sweep_growth);
}

MemoryNeeds memory_needs(const OpSpec& spec) {
  MemoryNeeds n;
  std::vector<c10::IValue> args;
  int64_t in_elems = 0, largest = 0, inputs = 0;
  for (const auto& a : spec.args) {
    if (a.kind != ArgKind::Tensor) {
      args.push_back(scalar_ivalue(a));
      continue;
    }
    at::Tensor t = at::empty_strided(a.sizes, a.strides, at::TensorOptions().dtype(a.dtype).device(at::kMeta));
    const int64_t extent = extent_bytes(a.sizes, a.strides, static_cast<int64_t>(c10::elementSize(a.dtype)));
    n.input_bytes += extent;
    largest = std::max(largest, extent);
    ++inputs;
    in_elems += t.numel();
    args.emplace_back(t);
  }
  int64_t out_elems = in_elems;
  n.output_bytes = n.input_bytes;
  int64_t outputs = 2;
  try {
    int64_t bytes = 0, elems = 0, count = 0;
    for (const auto& o : call_stock(spec, args, false))
      if (o.defined()) {
        bytes += tensor_bytes(o);
        elems += o.numel();
        ++count;
      }
    n.output_bytes = bytes;
    out_elems = elems;
    outputs = std::max<int64_t>(count, 1);
  } catch (const std::exception&) {
    // No meta kernel: the outputs are taken to be as large as the inputs.
  }
  n.float64_bytes = 8 * (in_elems + out_elems);
  // The guards of the arena's buffers: the workspace, the tensor inputs and
  // the outputs, each guarded on both sides, in at most two sets at once; an
  // edge case's guard grows with its largest input (make_case), to 256 MiB.
  n.guard_bytes = 4 * (1 + inputs + outputs) * edge_guard_bytes(largest);
  return n;
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
    c.guard = edge_guard_bytes(largest);
    ArgSpec& a = c.specs[static_cast<size_t>(plan.edge_arg)];
    a.sizes[static_cast<size_t>(plan.edge_dim)] = plan.edge_size;
    a.strides = contiguous(a.sizes);
    // A pinned int follows the size, as the package sets it for such a call
    // (runtime/package/override.cpp); without it the stock kernel refuses the case.
    for (const auto& [arg, vary] : family.sig.pins) {
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
    // An argument the family keeps (verify.keep_args) takes the first sample's value in every case.
    const bool keep = std::find(family.keep_args.begin(), family.keep_args.end(), static_cast<int>(i)) !=
                      family.keep_args.end();
    if (!entry && keep && samples.is_array() && !samples.empty()) {
      const json& first = sample_entries(samples, 0);
      if (first.is_array() && i < first.size()) entry = &first[i];
    }
    if (entry && entry->is_object() && entry->contains("file") && (*entry)["file"].is_string()) {
      const int64_t stored = load_sample(b.t, a, *entry, samples_dir);
      c.origin.push_back(sample_part::origin(stored, c10::multiply_integers(a.sizes)));
    } else {
      fill_random(b.t, plan.lo, plan.hi, tseed++, family, static_cast<int>(i));
      c.origin.push_back("fresh");
    }
    c.args.emplace_back(b.t);
    c.buffers.push_back(std::move(b));
  }
  if (plan.kind == CasePlan::Special && plan.special != "storage_offset") apply_special(c, plan.special);
  return c;
}

void refill_in_place(Case& c, const Family& family, uint64_t seed) {
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    const bool keep = std::find(family.keep_args.begin(), family.keep_args.end(), static_cast<int>(i)) !=
                      family.keep_args.end();
    if (c.buffers[i].t.defined() && !keep)
      fill_random(c.buffers[i].t, c.plan.lo, c.plan.hi, seed++, family, static_cast<int>(i));
  }
}

void sample_int_ranges(const OpSpec& spec, const json& samples, const std::string& samples_dir, Family& family) {
  for (size_t k = 0; k < samples.size(); ++k) {
    const json& entries = sample_entries(samples, static_cast<int>(k));
    if (!entries.is_array() || entries.size() != spec.args.size()) continue;
    for (size_t i = 0; i < spec.args.size(); ++i) {
      const ArgSpec& a = spec.args[i];
      const json& e = entries[i];
      if (a.kind != ArgKind::Tensor || at::isFloatingType(a.dtype) || a.dtype == c10::ScalarType::Bool ||
          !e.is_object() || !e.contains("file") || !e["file"].is_string())
        continue;
      int64_t lo = 0, hi = 0;
      if (e.contains("min") && e.contains("max") && e["min"].is_number_integer() && e["max"].is_number_integer()) {
        // A partial sample carries the whole tensor's range, taken at capture.
        lo = e["min"].get<int64_t>(), hi = e["max"].get<int64_t>() + 1;
      } else {
        at::Tensor t = at::empty(a.sizes, at::TensorOptions().dtype(a.dtype));
        load_sample(t, a, e, samples_dir);
        if (t.numel() == 0) continue;
        lo = t.min().item<int64_t>(), hi = t.max().item<int64_t>() + 1;
      }
      auto [it, fresh] = family.arg_int_range.emplace(static_cast<int>(i), std::pair{lo, hi});
      if (!fresh) it->second = {std::min(it->second.first, lo), std::max(it->second.second, hi)};
    }
  }
}

}  // namespace forge::worker
