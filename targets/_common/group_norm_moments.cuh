// Partial moments of a group_norm slice's chunks and their merge (Chan et
// al.), for the templates that split a slice across blocks. A chunk of n
// elements with K its first one, S1 = sum (x - K), S2 = sum (x - K)^2, is
// {n, K + S1/n, S2 - S1^2/n}. Merged: n = n_a + n_b, d = mean_b - mean_a,
// mean = mean_a + d*n_b/n, M2 = M2_a + M2_b + d^2*n_a*n_b/n.
struct Moments {
  float n, mean, m2;
};
__device__ __forceinline__ Moments merge(Moments a, Moments b) {
  const float n = a.n + b.n;
  if (n == 0.0f) return a;
  const float d = b.mean - a.mean;
  const float fb = b.n / n;
  return Moments{n, a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb};
}

// The merge of `count` partials {n, mean, M2} at slots[0..3*count), by one
// full warp: lane l takes partials l, l+32, ... in order, then a fixed shuffle
// tree, so every caller gets the same bits. Lane 0 holds the result. The
// slots are read through L2 (ld.global.cg): other SMs wrote them.
__device__ __forceinline__ Moments warp_merge(const float* slots, int64_t count) {
  const int lane = threadIdx.x & 31;
  Moments m{0.0f, 0.0f, 0.0f};
  for (int64_t p = lane; p < count; p += 32) {
    const float* s = slots + p * 3;
    m = merge(m, Moments{__ldcg(s), __ldcg(s + 1), __ldcg(s + 2)});
  }
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    Moments other{__shfl_down_sync(0xffffffffu, m.n, o), __shfl_down_sync(0xffffffffu, m.mean, o),
                  __shfl_down_sync(0xffffffffu, m.m2, o)};
    if ((lane & (2 * o - 1)) == 0) m = merge(m, other);
  }
  return m;
}
