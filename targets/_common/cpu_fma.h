#include "../_common/cpu_vfma.h"  // vfma, sfma

#include "../_common/chain_epilogue.h"  // FORGE_EPILOGUE: a chain's tail after the affine pass, or nothing

// y = fma(x, scale, bias) over one contiguous plane of a channel: group_norm's
// and batch_norm's affine pass, one rounding per element like the stock kernels
// (then FORGE_EPILOGUE, where a chain's template defines one).
// With FORGE_P_STREAM 1 a float32 plane's whole vectors are written with
// non-temporal stores (store_stream) from its first vector-aligned element:
// the caller fences before it returns.
#ifndef FORGE_P_STREAM
#define FORGE_P_STREAM 0
#endif
template <class T>
inline void apply_plane(const T* x, T* y, int64_t hw, float scale, float bias) {
  const vf sv = splat(scale), bv = splat(bias);
  int64_t i = 0;
  if constexpr (FORGE_P_STREAM && sizeof(T) == 4) {
    if (reinterpret_cast<uintptr_t>(y) % 4 == 0) {
      const int64_t head = stream_head(y);
      if (head > 0 && head < hw) {
        store_part(y, FORGE_EPILOGUE(vfma(load_part(x, head, T{}), sv, bv)), head);
        i = head;
      }
      if (stream_aligned(y + i))
        for (; i + W <= hw; i += W)
          store_stream(reinterpret_cast<float*>(y + i), FORGE_EPILOGUE(vfma(load(x + i), sv, bv)));
    }
  }
  for (; i + 2 * W <= hw; i += 2 * W) {
    store(y + i, FORGE_EPILOGUE(vfma(load(x + i), sv, bv)));
    store(y + i + W, FORGE_EPILOGUE(vfma(load(x + i + W), sv, bv)));
  }
  for (; i + W <= hw; i += W) store(y + i, FORGE_EPILOGUE(vfma(load(x + i), sv, bv)));
  if (i < hw) store_part(y + i, FORGE_EPILOGUE(vfma(load_part(x + i, hw - i, T{}), sv, bv)), hw - i);
}
