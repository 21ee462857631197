// native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean,
//                   Tensor? running_var, bool training, float momentum, float eps)
//   -> (Tensor out, Tensor save_mean, Tensor save_invstd)      (training=True only)
// The call changes running_mean and running_var in place although its schema
// marks no write: the worker and the package hand the kernel their old values
// as inputs 3 and 4 and their new values as outputs 3 and 4 (docs/WORKER.md,
// "Inputs the call changes"). Without running statistics (instance norm,
// track_running_stats=False) there are 3 outputs.
// Checks a call against what every training-mode template assumes and fills
// `a`: 0 when usable. input/out NCHW-contiguous of one float dtype; weight,
// bias and running stats (optional, the stats both or neither) C contiguous
// elements of one float dtype; save_* and the new stats C contiguous elements.
// Internal linkage: the package loads many candidates into one process.
namespace {
inline bool bn_vector(const forge_tensor& t, int64_t C) {
  return t.data && host_float(t.dtype) && host_numel(t) == C && host_contiguous(t);
}

inline int parse_batch_norm_train(const forge_call* call, BnTrainArgs& a) {
  if (!call || call->n_inputs != 5 || call->n_scalars < 3) return 1;
  if (call->scalars[0].kind != FORGE_ARG_BOOL || call->scalars[0].i == 0) return 1;  // training only
  if (call->scalars[1].kind != FORGE_ARG_FLOAT || call->scalars[2].kind != FORGE_ARG_FLOAT) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& rm = call->inputs[3];
  const forge_tensor& rv = call->inputs[4];
  const bool running = rm.data != nullptr;
  if ((rv.data != nullptr) != running) return 1;
  const int base = running ? 5 : 3;  // native_batch_norm's outputs; cudnn_batch_norm's have a reserve
  const int reserve = call->n_outputs == base + 1 ? 3 : -1;
  if (call->n_outputs != base && reserve < 0) return 1;
  if (reserve >= 0 && host_numel(call->outputs[reserve]) != 0) return 1;
  const int stats = reserve >= 0 ? 4 : 3;  // the new running statistics
  if (!x.data || x.ndim < 2 || !host_float(x.dtype) || !host_contiguous(x)) return 1;
  const forge_tensor& y = call->outputs[0];
  if (!y.data || y.ndim != x.ndim || y.dtype != x.dtype || !host_contiguous(y)) return 1;
  for (int d = 0; d < x.ndim; ++d)
    if (y.sizes[d] != x.sizes[d]) return 1;
  const int64_t N = x.sizes[0], C = x.sizes[1], numel = host_numel(x);
  if (N * C == 0 || numel == 0) return 1;
  const int64_t HW = numel / (N * C);
  int32_t p_dtype = -1;
  for (int k = 1; k <= 4; ++k) {
    const forge_tensor& p = call->inputs[k];
    if (!p.data) continue;
    if (!bn_vector(p, C) || (p_dtype >= 0 && p.dtype != p_dtype)) return 1;
    p_dtype = p.dtype;
  }
  const forge_tensor& sm = call->outputs[1];
  const forge_tensor& si = call->outputs[2];
  if (!bn_vector(sm, C) || !bn_vector(si, C) || si.dtype != sm.dtype) return 1;
  void* new_rm = nullptr;
  void* new_rv = nullptr;
  if (running) {
    const forge_tensor& nm = call->outputs[stats];
    const forge_tensor& nv = call->outputs[stats + 1];
    if (!bn_vector(nm, C) || !bn_vector(nv, C) || nm.dtype != rm.dtype || nv.dtype != rv.dtype) return 1;
    new_rm = nm.data;
    new_rv = nv.data;
  }
  a = BnTrainArgs{x.data,  call->inputs[1].data, call->inputs[2].data, rm.data,  rv.data,
                  y.data,  sm.data,              si.data,              new_rm,   new_rv,
                  x.dtype, p_dtype >= 0 ? p_dtype : x.dtype,           sm.dtype, N, C, HW,
                  call->scalars[1].f, call->scalars[2].f, reserve >= 0};
  return 0;
}
}  // namespace
