/* ---- an N x N block of N-lane vectors transposed in registers ----
 * transpose_block<V, M, N>(v): v[i][k] becomes v[k][i] (i, k < N). V is a
 * GCC vector of N lanes, M the integer vector of V's lane width that
 * __builtin_shuffle takes as its mask. Each of log2(N) rounds swaps the
 * off-diagonal H x H blocks of row pairs H apart; the masks are constants,
 * so each swap is one or two shuffle instructions. Inlined into CPU
 * templates (forge expands the include). */

// Lane k of rows i and i + H, with (i & H) == 0, after one round.
template <class V, class M, int N, int H>
__attribute__((always_inline)) inline void swap_blocks(V* v) {
  M lo, hi;
#pragma GCC unroll 16
  for (int k = 0; k < N; ++k) {
    lo[k] = (k & H) ? N + k - H : k;
    hi[k] = (k & H) ? N + k : k + H;
  }
#pragma GCC unroll 16
  for (int i = 0; i < N; ++i)
    if (!(i & H)) {
      const V a = v[i], b = v[i + H];
      v[i] = __builtin_shuffle(a, b, lo);
      v[i + H] = __builtin_shuffle(a, b, hi);
    }
}

template <class V, class M, int N>
__attribute__((always_inline)) inline void transpose_block(V* v) {
  static_assert(N == 2 || N == 4 || N == 8 || N == 16, "transpose_block: N lanes, a power of two up to 16");
  if constexpr (N >= 16) swap_blocks<V, M, N, 8>(v);
  if constexpr (N >= 8) swap_blocks<V, M, N, 4>(v);
  if constexpr (N >= 4) swap_blocks<V, M, N, 2>(v);
  swap_blocks<V, M, N, 1>(v);
}
