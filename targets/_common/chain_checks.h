// A fused chain's call checked against what forge generated the kernel for
// (rules/search/chain_strategies.h): the chain's inputs in order, each read
// as CHAIN_FULL (element j of a contiguous tensor of the output's size),
// CHAIN_BCAST (a contiguous tensor of n2 * n elements whose dims are at most
// two runs of the output's: element ((j / inner2) % n2) * n + (j / inner) % n;
// a bias, a per-channel vector, a one-element tensor, an attention mask of
// [batch, 1, q, k] beside [batch, heads, q, k]) or CHAIN_VALUE (a
// Python number, float64 or int64, or a CUDA chain's float32 0-dim CPU tensor,
// in host memory), one contiguous output of
// kChainNumel elements; the generated chain_shapes_ok then checks every
// tensor's exact sizes. Host code, shared by the CPU and CUDA templates.
#define CHAIN_FULL 0
#define CHAIN_BCAST 1
#define CHAIN_VALUE 2

namespace {

inline int64_t chain_numel(const forge_tensor& t) {
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.sizes[d];
  return n;
}

inline bool chain_contiguous(const forge_tensor& t) {
  int64_t expect = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.sizes[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.sizes[d];
  }
  return true;
}

// Input k as generated: its dtype, mode and extent; a VALUE is read into *value.
template <class HostReadable>
inline bool chain_input_ok(const forge_tensor& t, int32_t dtype, int mode, int64_t n, int64_t numel, float* value,
                           HostReadable host_readable) {
  if (t.ndim < 0 || t.ndim > FORGE_MAX_DIMS || !t.data) return false;
  if (mode == CHAIN_VALUE) {
    if (chain_numel(t) != 1 || !host_readable(t.data)) return false;
    if (t.dtype == FORGE_FLOAT64 && dtype == FORGE_FLOAT64) *value = static_cast<float>(*static_cast<const double*>(t.data));
    else if (t.dtype == FORGE_INT64 && dtype == FORGE_INT64) *value = static_cast<float>(*static_cast<const int64_t*>(t.data));
    else if (t.dtype == FORGE_FLOAT32 && dtype == FORGE_FLOAT32) *value = *static_cast<const float*>(t.data);
    else return false;
    return true;
  }
  if (t.dtype != dtype || !chain_contiguous(t)) return false;
  return chain_numel(t) == (mode == CHAIN_FULL ? numel : n);
}

// Where output element j reads a broadcast input (the outer run n2 == 1 when there is one run).
#ifdef __CUDACC__
__host__ __device__
#endif
inline int64_t chain_bcast_index(int64_t j, int64_t inner, int64_t n, int64_t inner2, int64_t n2) {
  return (n2 == 1 ? 0 : ((j / inner2) % n2) * n) + (j / inner) % n;
}

inline bool chain_sizes_are(const forge_tensor& t, const int64_t* sizes, int ndim) {
  if (t.ndim != ndim) return false;
  for (int d = 0; d < ndim; ++d)
    if (t.sizes[d] != sizes[d]) return false;
  return true;
}

inline bool chain_output_ok(const forge_call* call, int32_t dtype, int64_t numel) {
  if (!call || call->n_outputs != 1) return false;
  const forge_tensor& y = call->outputs[0];
  return y.data && y.ndim >= 0 && y.ndim <= FORGE_MAX_DIMS && y.dtype == dtype && chain_contiguous(y) &&
         chain_numel(y) == numel;
}

}  // namespace
