// A candidate in its runner: binding calls to arena buffers, one call, and the
// checks every call gets (judge.h).
#ifndef NDEBUG
#error "build with -DNDEBUG against the release wheel (docs/CAPTURE.md, the RecordFunction pitfall)"
#endif

#include <cstring>

#include "../common/dtypes.h"
#include "judge.h"
#include "op_args_detail.h"

namespace forge::worker {

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

namespace {

runner::TensorMsg message(const forge_tensor& t, const Arena& arena) {
  runner::TensorMsg m{};
  m.ndim = t.ndim;
  m.dtype = t.dtype;
  for (int d = 0; d < FORGE_MAX_DIMS; ++d) {
    m.sizes[d] = t.sizes[d];
    m.strides[d] = t.strides[d];
  }
  m.offset = -1;
  if (t.data) {
    m.offset = arena.offset_of(t.data);
    if (m.offset < 0 && arena.cuda()) {
      // A host tensor (byte_buffer keeps CPU tensors out of the CUDA arena): its bytes travel in the message.
      const int64_t bytes = detail::extent_bytes(at::IntArrayRef(t.sizes, static_cast<size_t>(t.ndim)),
                                                 at::IntArrayRef(t.strides, static_cast<size_t>(t.ndim)),
                                                 dtypes::abi_bytes(t.dtype));
      if (bytes <= 0 || bytes > runner::kInlineBytes)
        throw RequestError("a CPU tensor of " + std::to_string(bytes) + " bytes beside CUDA ones (at most " +
                           std::to_string(runner::kInlineBytes) + " travel to the runner)");
      std::memcpy(m.host, t.data, static_cast<size_t>(bytes));
      m.offset = runner::kHostInline;
    }
    if (m.offset == -1) throw std::logic_error("a candidate buffer outside the exchange arena");
  }
  return m;
}

}  // namespace

void Session::fill_request(runner::Request& q, const CallSet& cs) const {
  if (cs.in_desc.size() > runner::kMaxInputs || cs.out_desc.size() > runner::kMaxOutputs ||
      cs.scalars.size() > runner::kMaxScalars)
    throw RequestError("the op has more arguments than the runner protocol carries");
  q.n_inputs = static_cast<int32_t>(cs.in_desc.size());
  q.n_outputs = static_cast<int32_t>(cs.out_desc.size());
  q.n_scalars = static_cast<int32_t>(cs.scalars.size());
  for (size_t i = 0; i < cs.in_desc.size(); ++i) q.inputs[i] = message(cs.in_desc[i], m_arena);
  for (size_t i = 0; i < cs.out_desc.size(); ++i) q.outputs[i] = message(cs.out_desc[i], m_arena);
  for (size_t i = 0; i < cs.scalars.size(); ++i) q.scalars[i] = cs.scalars[i];
  q.workspace_offset = -1;
  if (cs.workspace.t.defined()) {
    q.workspace_offset = m_arena.offset_of(cs.workspace.t.data_ptr());
    q.workspace_bytes = cs.workspace.t.numel();
  }
}

CallResult Session::call(const CallSet& cs, runner::Cmd cmd, bool timed) {
  static runner::Request q;  // 10 KB: not on the stack
  std::memset(&q, 0, sizeof q);
  q.cmd = cmd;
  q.flags = timed ? runner::kTimed : 0;
  fill_request(q, cs);
  // What the judge wrote (fills, poison) has landed before the runner reads.
  m_dev.synchronize(m_stream);
  return call_request(q);
}

CallResult Session::stage(const CallSet& cs, int slot) {
  static runner::Request q;
  std::memset(&q, 0, sizeof q);
  q.cmd = runner::Cmd::Stage;
  q.slot = slot;
  fill_request(q, cs);
  return call_request(q);
}

CallResult Session::together(int n) {
  static runner::Request q;
  std::memset(&q, 0, sizeof q);
  q.cmd = runner::Cmd::Together;
  q.slot = n;
  m_dev.synchronize(m_stream);
  return call_request(q);
}

std::optional<Failure> Session::end_threads() {
  static runner::Request q;
  std::memset(&q, 0, sizeof q);
  q.cmd = runner::Cmd::EndThreads;
  CallResult r = call_request(q);
  if (r.gone) return Failure{r.gone->reason, r.gone->detail + " (ending the call threads)"};
  if (m_threads >= 0 && r.reply.threads > m_threads - runner::kMaxSlots)
    return Failure{"forbidden", "a call thread of the runner did not end (the candidate holds it)"};
  if (m_threads >= 0) m_threads = r.reply.threads;
  return std::nullopt;
}

CallResult Session::call_request(runner::Request& q) {
  RunnerResult r = m_runner.request(q, m_timeout);
  CallResult out;
  if (!r.ok) {
    out.gone = Failure{r.reason, r.detail};
    return out;
  }
  out.reply = r.reply;
  out.round_trip_us = r.round_trip_us;
  return out;
}

std::optional<Failure> Session::check(const CallResult& r, const std::string& where, bool* declined) const {
  *declined = false;
  if (r.gone) return Failure{r.gone->reason, r.gone->detail + " " + where};
  const runner::Reply& y = r.reply;
  if (y.status == runner::Status::Exception)
    return Failure{"exception", "forge_kernel threw: " + one_line(std::string(y.text, strnlen(y.text, sizeof y.text))) +
                                    " " + where};
  if (y.status != runner::Status::Ok)
    return Failure{"crashed", "the runner failed: " + std::string(y.text, strnlen(y.text, sizeof y.text)) + " " + where};
  std::string derr(y.device_error, strnlen(y.device_error, sizeof y.device_error));
  if (!derr.empty()) return Failure{"cuda_error", "CUDA error " + derr + " " + where};
  if (m_threads >= 0 && y.threads > m_threads)
    return Failure{"forbidden", "a thread the candidate started outlived the call (" +
                                    std::to_string(y.threads - m_threads) + " more) " + where};
  std::string changed(y.changed, strnlen(y.changed, sizeof y.changed));
  if (!changed.empty()) {
    if (changed.find("at an input") != std::string::npos)
      return Failure{"aliased_output", "the candidate pointed " + changed + " " + where};
    return Failure{"abi_mismatch", "the candidate modified " + changed + " " + where};
  }
  if (y.rc != 0) *declined = true;
  return std::nullopt;
}

std::optional<Failure> Session::bind(CallSet& cs, const Case& c, const std::vector<at::Tensor>& ref, bool guarded) {
  cs.inputs.clear();
  for (size_t i = 0; i < c.specs.size(); ++i)
    if (c.specs[i].schema_tensor) cs.inputs.push_back(c.buffers[i].t);
  cs.outputs.clear();
  for (const auto& r : ref) {
    if (!r.defined()) {
      cs.outputs.emplace_back();
      continue;
    }
    cs.outputs.push_back(alloc_tensor(r.sizes(), r.strides(), r.scalar_type(), r.device(), guarded, c.guard));
  }
  cs.in_desc.clear();
  for (const auto& t : cs.inputs) cs.in_desc.push_back(forge_view(t));
  cs.out_desc.clear();
  for (const auto& b : cs.outputs) cs.out_desc.push_back(forge_view(b.t));
  cs.scalars = forge_scalars(c.specs);
  cs.workspace = Buffer{};
  CallResult r = call(cs, runner::Cmd::Workspace, false);
  if (r.gone) return Failure{r.gone->reason, r.gone->detail + " (in forge_workspace_bytes)"};
  if (r.reply.status == runner::Status::Exception)
    return Failure{"exception", "forge_workspace_bytes threw: " +
                                    one_line(std::string(r.reply.text, strnlen(r.reply.text, sizeof r.reply.text)))};
  const int64_t n = r.reply.value;
  // A generous cap: the inputs and outputs several times over, plus 1 GiB.
  int64_t io = 0;
  for (const auto& t : cs.inputs) io += tensor_bytes(t);
  for (const auto& b : cs.outputs) io += tensor_bytes(b.t);
  const int64_t cap = 8 * io + (int64_t(1) << 30);
  if (n < 0 || n > cap)
    return Failure{"bad_candidate", "forge_workspace_bytes returned " + std::to_string(n) + " (allowed 0.." +
                                        std::to_string(cap) + ")"};
  if (n > 0) {
    const int64_t one = 1;
    c10::Device dev = ref.empty() || !ref.front().defined() ? c10::Device(c10::kCPU) : ref.front().device();
    cs.workspace = alloc_tensor({n}, {one}, at::kByte, dev, guarded, c.guard);
  }
  return std::nullopt;
}

}  // namespace forge::worker
