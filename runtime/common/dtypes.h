// The dtype table: every dtype name forge writes or reads (the capture's
// records, family.yaml's tolerances, package.json, the worker's requests),
// with its element size and its code in the candidate ABI. Torch-free: forge
// itself uses it, and the runtime's torch side maps it to c10::ScalarType
// (dtypes_torch.h) from the same rows.
//
// The names are torch's Python attribute names (torch.float32, torch.bfloat16),
// so the Python side keeps no table: it names a dtype as str(dtype) does, less
// "torch." (compile.py, for libforge.so's guard), or maps a name with
// getattr(torch, name).
#pragma once

#include <cstdint>
#include <string_view>

#include "../abi/forge_kernel.h"

// One row per dtype: X(name, c10::ScalarType enumerator, bytes per element,
// enum forge_dtype code or -1 when the ABI has none). The first ten are the
// ABI's; the order is the lookup order.
#define FORGE_DTYPE_TABLE(X)                          \
  X(float32, Float, 4, FORGE_FLOAT32)            \
  X(float64, Double, 8, FORGE_FLOAT64)           \
  X(float16, Half, 2, FORGE_FLOAT16)             \
  X(bfloat16, BFloat16, 2, FORGE_BFLOAT16)       \
  X(int64, Long, 8, FORGE_INT64)                 \
  X(int32, Int, 4, FORGE_INT32)                  \
  X(int16, Short, 2, FORGE_INT16)                \
  X(int8, Char, 1, FORGE_INT8)                   \
  X(uint8, Byte, 1, FORGE_UINT8)                 \
  X(bool, Bool, 1, FORGE_BOOL)                   \
  X(complex64, ComplexFloat, 8, -1)              \
  X(complex128, ComplexDouble, 16, -1)           \
  X(uint16, UInt16, 2, -1)                       \
  X(uint32, UInt32, 4, -1)                       \
  X(uint64, UInt64, 8, -1)                       \
  X(float8_e5m2, Float8_e5m2, 1, -1)             \
  X(float8_e4m3fn, Float8_e4m3fn, 1, -1)         \
  X(complex32, ComplexHalf, 4, -1)               \
  X(qint8, QInt8, 1, -1)                         \
  X(quint8, QUInt8, 1, -1)                       \
  X(qint32, QInt32, 4, -1)                       \
  X(float8_e5m2fnuz, Float8_e5m2fnuz, 1, -1)     \
  X(float8_e4m3fnuz, Float8_e4m3fnuz, 1, -1)

namespace forge::dtypes {

struct Dtype {
  std::string_view name;
  int bytes;    // element size
  int32_t abi;  // enum forge_dtype, -1: not in the candidate ABI
};

#define FORGE_DTYPE_ROW(name, c10_type, bytes, abi) Dtype{#name, bytes, abi},
inline constexpr Dtype kAll[] = {FORGE_DTYPE_TABLE(FORGE_DTYPE_ROW)};
#undef FORGE_DTYPE_ROW

// The row of `name`, or nullptr for a name not in the table.
constexpr const Dtype* find(std::string_view name) {
  for (const Dtype& d : kAll)
    if (d.name == name) return &d;
  return nullptr;
}

// Element size of `name`; 0 for a name not in the table.
constexpr int bytes(std::string_view name) {
  const Dtype* d = find(name);
  return d ? d->bytes : 0;
}

// Element size of the dtype with ABI code `abi` (enum forge_dtype); 0 for none.
constexpr int abi_bytes(int32_t abi) {
  for (const Dtype& d : kAll)
    if (abi >= 0 && d.abi == abi) return d.bytes;
  return 0;
}

// Is `name` a dtype the candidate ABI carries (the ones a family's tolerance may name)?
constexpr bool in_abi(std::string_view name) {
  const Dtype* d = find(name);
  return d && d->abi >= 0;
}

}  // namespace forge::dtypes
