// A pairwise loss call (targets/loss's op table):
//   mse_loss(Tensor self, Tensor target, int reduction)
//   smooth_l1_loss(Tensor self, Tensor target, int reduction, float beta)
//   huber_loss(Tensor self, Tensor target, int reduction, float delta)
// self and target of one shape and float dtype, contiguous, non-empty (no
// broadcasting); the output contiguous: self's shape for reduction 0, one
// element otherwise. Shared by the CPU and the CUDA templates. Host code.

namespace {

inline int parse_loss(const forge_call* call, LossArgs& a) {
  constexpr int ns = LS_OP == LS_mse_loss ? 1 : 2;
  if (!call || call->n_inputs != 2 || call->n_outputs != 1 || call->n_scalars != ns) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& t = call->inputs[1];
  const forge_tensor& y = call->outputs[0];
  if (!x.data || !t.data || !y.data || !host_float(x.dtype) || t.dtype != x.dtype || !host_float(y.dtype)) return 1;
  if (x.ndim != t.ndim || !host_contiguous(x) || !host_contiguous(t) || !host_contiguous(y)) return 1;
  for (int d = 0; d < x.ndim; ++d)
    if (x.sizes[d] != t.sizes[d]) return 1;
  a.n = host_numel(x);
  if (a.n == 0) return 1;  // stock's mean of nothing is NaN: not this template's
  const forge_scalar& r = call->scalars[0];
  if (r.kind != FORGE_ARG_INT || r.i < 0 || r.i > 2) return 1;
  a.reduction = static_cast<int32_t>(r.i);
  if (host_numel(y) != (a.reduction == 0 ? a.n : 1)) return 1;
  a.k = 0.0f;
  if (ns == 2) {
    const forge_scalar& k = call->scalars[1];
    const double v = k.kind == FORGE_ARG_FLOAT ? k.f : k.kind == FORGE_ARG_INT ? static_cast<double>(k.i) : -1.0;
    if (!(v >= 0.0) || (LS_OP == LS_huber_loss && v == 0.0)) return 1;  // stock refuses them
    a.k = static_cast<float>(v);
  }
  a.x = x.data;
  a.t = t.data;
  a.y = y.data;
  a.x_dtype = x.dtype;
  a.y_dtype = y.dtype;
  return 0;
}

}  // namespace
