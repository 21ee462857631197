#include "../_common/cpu_vfma.h"  // vfma, sfma

#include "../_common/chain_epilogue.h"  // FORGE_EPILOGUE: a chain's tail after the affine pass, or nothing

// y = fma(x, scale, bias) over one contiguous plane of a channel: group_norm's
// and batch_norm's affine pass, one rounding per element like the stock kernels
// (then FORGE_EPILOGUE, where a chain's template defines one).
template <class T>
inline void apply_plane(const T* x, T* y, int64_t hw, float scale, float bias) {
  const vf sv = splat(scale), bv = splat(bias);
  int64_t i = 0;
  for (; i + 2 * W <= hw; i += 2 * W) {
    store(y + i, FORGE_EPILOGUE(vfma(load(x + i), sv, bv)));
    store(y + i + W, FORGE_EPILOGUE(vfma(load(x + i + W), sv, bv)));
  }
  for (; i + W <= hw; i += W) store(y + i, FORGE_EPILOGUE(vfma(load(x + i), sv, bv)));
  if (i < hw) store_part(y + i, FORGE_EPILOGUE(vfma(load_part(x + i, hw - i, T{}), sv, bv)), hw - i);
}
