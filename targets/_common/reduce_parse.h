// A reduction call (targets/reduce's op table) as [outer, R, inner]: the
// reduced dims must be one run of neighbouring dims (dims of extent 1
// anywhere), each group of dims merging into one stride (any contiguous
// input; a slice or permutation whose groups merge), so the call reduces R
// blocks of `inner` side-by-side elements for each of `outer` positions; the
// output (values, and
// indices for argmax/argmin/max.dim/min.dim) is contiguous [outer, inner].
// Shared by the CPU and the CUDA templates. Host code: the CPU templates
// include it after their ISA region (cpu_checks.h). Internal linkage.
//
// The op is the template's (RD_OP, reduce_ops.h); its scalars, in schema order:
//   sum.dim_IntList, mean.dim: dim (int[]? : None or [] = every dim), keepdim, dtype?
//   sum (no overload):          dtype?                 (every dim)
//   amax, amin:                 dim (int[]: [] = every dim), keepdim
//   prod.dim_int:               dim (int), keepdim, dtype?
//   argmax, argmin:             dim (int? : None = every dim, flattened), keepdim
//   max.dim, min.dim:           dim (int), keepdim -> (values, indices)
//   linalg_vector_norm:         ord (1 or 2 here), dim (int[]? : None or [] = every dim), keepdim, dtype?
// ReduceArgs (reduce_ops.h) holds the result.

namespace {

inline int parse_reduce(const forge_call* call, ReduceArgs& a) {
  if (!call || call->n_inputs != 1) return 1;
  const forge_tensor& x = call->inputs[0];
  const int nd = x.ndim;
  if (!x.data || nd < 0 || nd > FORGE_MAX_DIMS || !host_float(x.dtype)) return 1;
  a.ord = 0;
  const forge_scalar* s = call->scalars;
  const int ns = call->n_scalars;
  bool reduced[FORGE_MAX_DIMS] = {};
  bool all = false;
  // The dim argument: one int, an int list, or None.
  auto take_dims = [&](const forge_scalar& d, bool empty_is_all) {
    if (d.kind == FORGE_ARG_NONE) {
      all = true;
      return true;
    }
    if (d.kind == FORGE_ARG_INT) {
      int64_t k = d.i < 0 ? d.i + (nd ? nd : 1) : d.i;
      if (k < 0 || k >= (nd ? nd : 1)) return false;
      if (nd) reduced[k] = true;
      return true;
    }
    if (d.kind != FORGE_ARG_INT_LIST || d.len < 0 || d.len > FORGE_MAX_LIST) return false;
    if (d.len == 0) {
      all = empty_is_all;
      return empty_is_all;
    }
    for (int j = 0; j < d.len; ++j) {
      int64_t k = d.ints[j] < 0 ? d.ints[j] + (nd ? nd : 1) : d.ints[j];
      if (k < 0 || k >= (nd ? nd : 1)) return false;
      if (nd) reduced[k] = true;
    }
    return true;
  };
#if RD_OP == RD_sum || RD_OP == RD_mean
  if (ns == 1) {  // sum(Tensor self, *, ScalarType? dtype): every dim
    all = true;
  } else if (ns != 3 || !take_dims(s[0], true)) {
    return 1;
  }
#elif RD_OP == RD_amax || RD_OP == RD_amin
  if (ns != 2 || s[0].kind != FORGE_ARG_INT_LIST || !take_dims(s[0], true)) return 1;
#elif RD_OP == RD_prod
  if (ns != 3 || s[0].kind != FORGE_ARG_INT || !take_dims(s[0], false)) return 1;
#elif RD_OP == RD_argmax || RD_OP == RD_argmin
  if (ns != 2 || !take_dims(s[0], false)) return 1;
#elif RD_NORM
  if (ns != 4 || !take_dims(s[1], true)) return 1;
  const double ord = s[0].kind == FORGE_ARG_INT ? static_cast<double>(s[0].i) : s[0].kind == FORGE_ARG_FLOAT ? s[0].f : 0;
  if (ord != 1.0 && ord != 2.0) return 1;  // inf, 0 and other powers: not this template's
  a.ord = static_cast<int>(ord);
#else  // max.dim, min.dim
  if (ns != 2 || s[0].kind != FORGE_ARG_INT || !take_dims(s[0], false)) return 1;
#endif
  if (all)
    for (int d = 0; d < nd; ++d) reduced[d] = true;
  // [outer, R, inner]: the reduced dims (extent-1 dims ignored) one run, each
  // group's dims merging into one stride: inner steps by one element, R by
  // sR, outer by sO (a sliced or permuted input whose groups merge is fine).
  // A value reduction may also be [R1, outer, R] (mean over dims 0, 2, 3 of
  // NCHW: reduced runs first and last, the kept dims between, inner 1): each
  // output reduces R1 rows of R, sR1 apart.
  int first = -1, last = -1;
  for (int d = 0; d < nd; ++d)
    if (reduced[d] && x.sizes[d] != 1) {
      if (first < 0) first = d;
      last = d;
    }
  a.R1 = 1;
  a.sR1 = 0;
  int split = -1;  // [R1, outer, R]: the first dim of the last reduced run
#if !RD_WITH_INDEX && !RD_PROD
  {
    // The kept dims (extent > 1): two runs when they lie strictly between
    // the first and the last reduced dim, with no reduced dim among them.
    int kept_first = -1, kept_last = -1;
    for (int d = 0; d < nd; ++d)
      if (!reduced[d] && x.sizes[d] != 1) {
        if (kept_first < 0) kept_first = d;
        kept_last = d;
      }
    bool two_runs = kept_first > first && kept_last < last;
    for (int d = kept_first; two_runs && d <= kept_last; ++d) two_runs = !reduced[d] || x.sizes[d] == 1;
    if (two_runs) split = kept_last + 1;
  }
#endif
  // The dims of extent > 1 of each group (outer, R, inner) in logical order;
  // group 3: R1's.
  int group_dims[4][FORGE_MAX_DIMS], count[4] = {0, 0, 0, 0};
  for (int d = 0; d < nd; ++d) {
    if (x.sizes[d] == 1) continue;
    const bool in_run = first >= 0 && d >= first && d <= last;
    int g;
    if (split >= 0) g = !reduced[d] ? 0 : d < split ? 3 : 1;
    else if (in_run && !reduced[d]) return 1;  // a kept dim between reduced ones
    else g = first < 0 ? 0 : in_run ? 1 : d > last ? 2 : 0;
    group_dims[g][count[g]++] = d;
  }
#if !RD_WITH_INDEX
  // A value reduction does not care in which order it meets the elements:
  // its reduced dims go by decreasing stride, so a permuted (transposed)
  // input's full sum reads memory in order. (An index is the flattened
  // logical position: argmax and max.dim keep the logical order.)
  for (int k = 1; k < count[1]; ++k)
    for (int j = k; j > 0 && x.strides[group_dims[1][j - 1]] < x.strides[group_dims[1][j]]; --j) {
      const int t = group_dims[1][j];
      group_dims[1][j] = group_dims[1][j - 1];
      group_dims[1][j - 1] = t;
    }
#endif
  // Each group's dims must merge into one stride.
  int64_t ext[4] = {1, 1, 1, 1}, step[4] = {0, 0, 0, 0};
  for (int g = 0; g < 4; ++g)
    for (int k = count[g] - 1; k >= 0; --k) {
      const int d = group_dims[g][k];
      if (ext[g] == 1) step[g] = x.strides[d];
      else if (x.strides[d] != step[g] * ext[g]) return 1;  // the group's dims do not merge
      ext[g] *= x.sizes[d];
    }
  if (ext[2] > 1 && step[2] != 1) return 1;  // inner elements side by side
  if (ext[2] == 1 && ext[1] > 1 && step[1] != 1) return 1;  // a row steps by one
  a.outer = ext[0];
  a.R = ext[1];
  a.inner = ext[2];
  a.sR = ext[1] > 1 ? step[1] : a.inner;
  a.sO = ext[0] > 1 ? step[0] : a.R * a.inner;
  if (split >= 0) {  // inner is 1: R's row steps by one (checked above)
    a.R1 = ext[3];
    a.sR1 = step[3];
  }
  if (host_numel(x) == 0) return 1;  // stock raises or fills identities: not this template's
  a.x = x.data;
  a.x_dtype = x.dtype;
  a.y = nullptr;
  a.idx = nullptr;
  a.y_dtype = x.dtype;
  const int64_t m = a.outer * a.inner;
  auto out_ok = [&](const forge_tensor& o, bool index) {
    if (!o.data || host_numel(o) != m || !host_contiguous(o)) return false;
    return index ? o.dtype == FORGE_INT64 : host_float(o.dtype);
  };
#if RD_OP == RD_argmax || RD_OP == RD_argmin
  if (call->n_outputs != 1 || !out_ok(call->outputs[0], true)) return 1;
  a.idx = static_cast<int64_t*>(call->outputs[0].data);
#elif RD_OP == RD_max || RD_OP == RD_min
  if (call->n_outputs != 2 || !out_ok(call->outputs[0], false) || !out_ok(call->outputs[1], true)) return 1;
  a.y = call->outputs[0].data;
  a.y_dtype = call->outputs[0].dtype;
  a.idx = static_cast<int64_t*>(call->outputs[1].data);
#else
  if (call->n_outputs != 1 || !out_ok(call->outputs[0], false)) return 1;
  a.y = call->outputs[0].data;
  a.y_dtype = call->outputs[0].dtype;
#endif
  return 0;
}

}  // namespace
