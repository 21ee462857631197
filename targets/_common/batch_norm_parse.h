// native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean,
//                   Tensor? running_var, bool training, float momentum, float eps)
//   -> (Tensor out, Tensor save_mean, Tensor save_invstd)      (training=False only)
// Checks a call against what every batch_norm template assumes and fills `a`:
// 0 when usable. input/out of one float dtype with equal strides, NCHW-
// contiguous or (accept_channels_last) channels-last; running stats present;
// weight/bias optional; parameters C contiguous elements of one float dtype;
// save_* both empty or both C contiguous elements of one float dtype. Host
// code: the CPU templates include it after their ISA region (cpu_checks.h).
// cudnn_batch_norm (a float32 BatchNorm with weights on CUDA) takes the same
// arguments and returns a fourth tensor, cuDNN's reserve space: taken when it
// is empty, as it is in eval mode.
// Internal linkage: the package loads many candidates into one process.
namespace {
// [N, C, *] with C fastest: strides (C*HW, 1, then row-major over * times C).
inline bool is_channels_last(const forge_tensor& t) {
  if (t.ndim < 2) return false;
  const int64_t C = t.sizes[1];
  if (C != 1 && t.strides[1] != 1) return false;
  int64_t expect = C;
  for (int d = t.ndim - 1; d >= 2; --d) {
    if (t.sizes[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.sizes[d];
  }
  return t.sizes[0] == 1 || t.strides[0] == expect;
}

inline int parse_batch_norm(const forge_call* call, bool accept_channels_last, BnArgs& a) {
  if (!call || call->n_inputs != 5 || (call->n_outputs != 3 && call->n_outputs != 4) || call->n_scalars < 3) return 1;
  if (call->n_outputs == 4 && host_numel(call->outputs[3]) != 0) return 1;  // cuDNN's reserve
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& w = call->inputs[1];
  const forge_tensor& b = call->inputs[2];
  const forge_tensor& rm = call->inputs[3];
  const forge_tensor& rv = call->inputs[4];
  const forge_tensor& y = call->outputs[0];
  const forge_tensor& sm = call->outputs[1];
  const forge_tensor& si = call->outputs[2];
  if (call->scalars[0].kind != FORGE_ARG_BOOL || call->scalars[0].i != 0) return 1;  // eval mode only
  if (call->scalars[2].kind != FORGE_ARG_FLOAT) return 1;
  if (!x.data || x.ndim < 2 || !host_float(x.dtype)) return 1;
  if (!y.data || y.ndim != x.ndim || y.dtype != x.dtype) return 1;
  for (int d = 0; d < x.ndim; ++d)
    if (y.sizes[d] != x.sizes[d] || (x.sizes[d] != 1 && y.strides[d] != x.strides[d])) return 1;
  const int64_t N = x.sizes[0], C = x.sizes[1], numel = host_numel(x);
  const int64_t HW = N * C != 0 ? numel / (N * C) : 0;
  const bool nchw = host_contiguous(x);
  if (!nchw && !(accept_channels_last && is_channels_last(x))) return 1;
  if (!rm.data || !rv.data) return 1;
  const forge_tensor* params[4] = {&w, &b, &rm, &rv};
  for (const forge_tensor* p : params) {
    if (!p->data) continue;
    if (p->dtype != rm.dtype || !host_float(p->dtype) || host_numel(*p) != C || !host_contiguous(*p)) return 1;
  }
  const int64_t ns = host_numel(sm);
  if (host_numel(si) != ns || (ns != 0 && ns != C)) return 1;
  if (ns && (!sm.data || !si.data || sm.dtype != si.dtype || !host_float(sm.dtype) || !host_contiguous(sm) ||
             !host_contiguous(si)))
    return 1;
  a = BnArgs{x.data,  w.data,   b.data, rm.data, rv.data, y.data, ns ? sm.data : nullptr, ns ? si.data : nullptr,
             x.dtype, rm.dtype, ns ? sm.dtype : x.dtype, N, C, HW, numel, !nchw,
             static_cast<float>(call->scalars[2].f)};
  return 0;
}
}  // namespace
