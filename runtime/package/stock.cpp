#include "stock.h"

#include <ATen/core/stack.h>

namespace forge::package {

std::optional<Stock> Stock::before_override(const c10::OperatorHandle& op, bool cuda, std::string* why) {
  const c10::DispatchKey key = cuda ? c10::DispatchKey::CUDA : c10::DispatchKey::CPU;
  const bool own = op.hasKernelForDispatchKey(key);
  const bool composite = op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
                         op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
  if (!own && !composite) {
    // A CompositeImplicitAutograd op (or one without this backend): the
    // backend key never sees its calls, so an override there would not either.
    if (why) *why = std::string("no ") + (cuda ? "CUDA" : "CPU") + " kernel to override (it decomposes into other ops)";
    return std::nullopt;
  }
  return Stock(op, op.getComputedKernelForDispatchKey(key), key);
}

std::vector<c10::IValue> Stock::operator()(const std::vector<c10::IValue>& args) const {
  torch::jit::Stack stack(args.begin(), args.end());
  m_kernel.callBoxed(m_op, c10::DispatchKeySet(m_key), &stack);
  return std::vector<c10::IValue>(std::make_move_iterator(stack.begin()), std::make_move_iterator(stack.end()));
}

}  // namespace forge::package
