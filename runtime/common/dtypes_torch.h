// The dtype table (dtypes.h) on the torch side: names to c10::ScalarType and
// back, from the same rows. For the runtime's torch-linked code only (the
// worker, libforge.so, the capture library); forge itself never includes it.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>
#include <string>
#include <string_view>

#include "dtypes.h"

namespace forge::dtypes {

struct TorchDtype {
  std::string_view name;
  c10::ScalarType type;
  int32_t abi;
};

#define FORGE_DTYPE_TORCH_ROW(name, c10_type, bytes, abi) TorchDtype{#name, c10::ScalarType::c10_type, abi},
inline constexpr TorchDtype kTorch[] = {FORGE_DTYPE_TABLE(FORGE_DTYPE_TORCH_ROW)};
#undef FORGE_DTYPE_TORCH_ROW

// "float32" -> Float; nullopt for a name not in the table.
inline std::optional<c10::ScalarType> scalar_type(std::string_view name) {
  for (const auto& d : kTorch)
    if (d.name == name) return d.type;
  return std::nullopt;
}

// Float -> "float32"; a type not in the table by c10's own name.
inline std::string name_of(c10::ScalarType t) {
  for (const auto& d : kTorch)
    if (d.type == t) return std::string(d.name);
  return c10::toString(t);
}

// The ABI's code of `t` (enum forge_dtype), -1 when the ABI has none.
inline int32_t abi_code(c10::ScalarType t) {
  for (const auto& d : kTorch)
    if (d.type == t) return d.abi;
  return -1;
}

}  // namespace forge::dtypes
