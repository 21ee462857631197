// An nll_loss_forward call (targets/nll_loss), cross entropy's second op:
//   nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction,
//                    int ignore_index) -> (Tensor output, Tensor total_weight)
// self [N, C] (or [C] with a 0-dim target) of float log-probabilities,
// contiguous; target int64 [N] (or 0-dim), contiguous; no weight; reduction
// 1 (mean) or 2 (sum): stock leaves total_weight unwritten for reduction 0,
// so that call is stock's. Both outputs one element of self's dtype.
// NllArgs: nll_loss_args.h. Shared by the CPU and the CUDA templates. Host
// code: the CPU templates include it after their ISA region.

namespace {

inline int parse_nll(const forge_call* call, NllArgs& a) {
  if (!call || call->n_inputs != 3 || call->n_outputs != 2 || call->n_scalars != 2) return 1;
  const forge_tensor& x = call->inputs[0];
  const forge_tensor& t = call->inputs[1];
  const forge_tensor& w = call->inputs[2];
  if (w.data) return 1;  // class weights: not this template's
  if (!x.data || !t.data || !host_float(x.dtype) || t.dtype != FORGE_INT64) return 1;
  if (!host_contiguous(x) || !host_contiguous(t) || (x.ndim != 1 && x.ndim != 2)) return 1;
  a.N = x.ndim == 2 ? x.sizes[0] : 1;
  a.C = x.sizes[x.ndim - 1];
  if (host_numel(t) != a.N || t.ndim != x.ndim - 1 || a.N == 0 || a.C == 0) return 1;
  const forge_scalar& r = call->scalars[0];
  const forge_scalar& ig = call->scalars[1];
  if (r.kind != FORGE_ARG_INT || (r.i != 1 && r.i != 2) || ig.kind != FORGE_ARG_INT) return 1;
  for (int k = 0; k < 2; ++k) {
    const forge_tensor& o = call->outputs[k];
    if (!o.data || o.dtype != x.dtype || host_numel(o) != 1) return 1;
  }
  a.x = x.data;
  a.t = static_cast<const int64_t*>(t.data);
  a.y = call->outputs[0].data;
  a.total = call->outputs[1].data;
  a.dtype = x.dtype;
  a.ignore = ig.i;
  a.mean = r.i == 1;
  a.one_row = x.ndim == 1;
  return 0;
}

}  // namespace
