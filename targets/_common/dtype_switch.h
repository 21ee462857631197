// Calls f(T{}) with T the backend's storage type for dtype d (F32, F16, BF16)
// and returns its result; 1 (the package falls back) for any other dtype and
// for those FORGE_DTYPES leaves out. forge defines FORGE_DTYPES as the
// signature's dtypes (forge_kernel.h), so a candidate compiles only the
// instances its calls can reach: nested calls that pick the types of several
// tensors multiply, 27 instances for x, weight and statistics.
template <class F32, class F16, class BF16, class F>
inline int with_storage_type(int32_t d, F&& f) {
  switch (d) {
#if FORGE_DTYPES & 1  /* 1 << FORGE_FLOAT32 (the enum is not a macro: #if needs the number) */
    case FORGE_FLOAT32: return f(F32{});
#endif
#if FORGE_DTYPES & 4  /* 1 << FORGE_FLOAT16 */
    case FORGE_FLOAT16: return f(F16{});
#endif
#if FORGE_DTYPES & 8  /* 1 << FORGE_BFLOAT16 */
    case FORGE_BFLOAT16: return f(BF16{});
#endif
    default: return 1;
  }
}
