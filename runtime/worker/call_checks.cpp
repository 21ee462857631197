// The named checks after a call (docs/WORKER.md, "Verification cases"), shared
// by verification (verify.cpp) and the concurrency check (verify_threads.cpp).
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include "judge.h"

namespace forge::worker {
namespace {

// Byte range [begin, end) a tensor's elements span.
std::pair<uintptr_t, uintptr_t> byte_range(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return {0, 0};
  int64_t lo = 0, hi = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t span = (t.size(d) - 1) * t.stride(d);
    (span < 0 ? lo : hi) += span;
  }
  auto base = reinterpret_cast<uintptr_t>(t.data_ptr());
  auto elem = static_cast<int64_t>(t.element_size());
  return {base + lo * elem, base + (hi + 1) * elem};
}

bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  auto [a0, a1] = byte_range(a);
  auto [b0, b1] = byte_range(b);
  return a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1;
}

}  // namespace

std::vector<at::Tensor> snapshot(const std::vector<Buffer>& bufs) {
  std::vector<at::Tensor> s;
  for (const auto& b : bufs) s.push_back(b.t.defined() ? b.t.clone() : at::Tensor());
  return s;
}

std::vector<at::Tensor> snapshot(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> s;
  for (const auto& t : ts) s.push_back(t.defined() ? t.clone() : at::Tensor());
  return s;
}

// ---------------------------------------------------------------------------
// The named checks after a call.

// guards: nothing written outside the outputs, the workspace or the inputs.
std::optional<Failure> check_guards(const CallSet& cs, const Case& c, const std::string& where) {
  const bool multi = cs.outputs.size() > 1;
  for (size_t k = 0; k < cs.outputs.size(); ++k)
    if (auto off = damaged_guard(cs.outputs[k]))
      return Failure{"out_of_bounds", "the candidate wrote outside output " + (multi ? std::to_string(k) + " " : "") +
                                          "(byte offset " + std::to_string(*off) +
                                          " relative to its first element) " + where};
  if (cs.workspace.t.defined())
    if (auto off = damaged_guard(cs.workspace))
      return Failure{"out_of_bounds",
                     "the candidate wrote outside its workspace (byte offset " + std::to_string(*off) + ") " + where};
  for (size_t i = 0; i < c.buffers.size(); ++i)
    if (auto off = damaged_guard(c.buffers[i]))
      return Failure{"input_modified", "the candidate wrote next to input " + c.specs[i].name + " (byte offset " +
                                           std::to_string(*off) + ") " + where};
  return std::nullopt;
}

// inputs: the same bits as before the call.
std::optional<Failure> check_inputs(const CallSet& cs, const std::vector<at::Tensor>& before,
                                    const std::string& where) {
  for (size_t i = 0; i < cs.inputs.size(); ++i)
    if (cs.inputs[i].defined())
      if (auto d = first_bit_difference(cs.inputs[i], before[i]))
        return Failure{"input_modified", "input " + std::to_string(i) + " changed at " + *d + " " + where};
  return std::nullopt;
}

// aliasing: no output overlaps an input.
std::optional<Failure> check_aliasing(const CallSet& cs, const std::string& where) {
  for (size_t k = 0; k < cs.outputs.size(); ++k)
    for (size_t i = 0; i < cs.inputs.size(); ++i)
      if (overlaps(cs.outputs[k].t, cs.inputs[i]))
        return Failure{"aliased_output", "output " + std::to_string(k) + " overlaps input " + std::to_string(i) + " " +
                                             where};
  return std::nullopt;
}

// late writes: the outputs are the same bits as an earlier snapshot.
std::optional<std::string> outputs_differ(const CallSet& cs, const std::vector<at::Tensor>& snap) {
  for (size_t k = 0; k < cs.outputs.size(); ++k)
    if (cs.outputs[k].t.defined())
      if (auto d = first_bit_difference(cs.outputs[k].t, snap[k])) return "output " + std::to_string(k) + " at " + *d;
  return std::nullopt;
}

// Poisons the outputs and the workspace with patterns drawn for this call.
void poison_call(Judge& j, CallSet& cs) {
  for (auto& o : cs.outputs) poison(o.t, j.draw());
  if (cs.workspace.t.defined()) cs.workspace.t.fill_(static_cast<int64_t>(j.draw() & 0xFF));
}

}  // namespace forge::worker
