#include "stock.h"

#include <ATen/core/stack.h>

namespace forge::package {

std::optional<Stock> Stock::before_override(const c10::OperatorHandle& op, bool cuda, std::string* why) {
  const c10::DispatchKey key = cuda ? c10::DispatchKey::CUDA : c10::DispatchKey::CPU;
  const bool own = op.hasKernelForDispatchKey(key);
  const bool composite = op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
                         op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
  if (own || composite) return Stock(op, op.getComputedKernelForDispatchKey(key), key, key);
  if (op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
    // Above autograd a kernel that writes an argument would bypass its version
    // counter and view updates: such ops are never captured as leaves.
    for (const auto& a : op.schema().arguments())
      if (a.alias_info() && a.alias_info()->isWrite()) {
        if (why) *why = "a composite that writes its argument `" + a.name() + "`";
        return std::nullopt;
      }
    return Stock(op, op.getComputedKernelForDispatchKey(key), key, c10::DispatchKey::CompositeImplicitAutograd);
  }
  if (why) *why = std::string("no ") + (cuda ? "CUDA" : "CPU") + " kernel and no composite to override";
  return std::nullopt;
}

std::vector<c10::IValue> Stock::operator()(const std::vector<c10::IValue>& args) const {
  torch::jit::Stack stack(args.begin(), args.end());
  m_kernel.callBoxed(m_op, c10::DispatchKeySet(m_key), &stack);
  return std::vector<c10::IValue>(std::make_move_iterator(stack.begin()), std::make_move_iterator(stack.end()));
}

}  // namespace forge::package
