// The stock kernels behind forge's overrides: what a call outside every forged
// signature family runs. Registering our kernel at aten's CPU/CUDA key puts it
// above the stock one in the dispatcher; the stock kernel stays registered
// below it, so the one the dispatcher computed for that key before the
// override is kept and called directly. Any op with a kernel for the backend
// (its own, or a CompositeExplicitAutograd one) has its stock fallback.
//
// An op with neither but a CompositeImplicitAutograd kernel (CPU max_pool1d,
// which computes inside the composite when no autograd is needed) is
// overridden at that key instead: a CPU-key registration would also take the
// composite away from AutogradCPU (pytorch/pytorch#113161), breaking
// gradients. There the override sees every call above autograd and tracing,
// on every device; the guard takes plain tensors only (guard.cpp), and the
// composite, the fallback, decomposes the rest as before.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <vector>

namespace forge::package {

class Stock {
 public:
  // The kernel `op` runs at the backend's key now (before the override);
  // nullopt, with *why, when the backend has none to fall back to.
  static std::optional<Stock> before_override(const c10::OperatorHandle& op, bool cuda, std::string* why);
  // Runs it on the boxed arguments (all schema arguments, in order).
  std::vector<c10::IValue> operator()(const std::vector<c10::IValue>& args) const;
  // Where the override registers: the backend key, or CompositeImplicitAutograd.
  c10::DispatchKey override_key() const { return m_override_key; }

 private:
  Stock(c10::OperatorHandle op, c10::SafeKernelFunction kernel, c10::DispatchKey key, c10::DispatchKey override_key)
      : m_op(std::move(op)), m_kernel(std::move(kernel)), m_key(key), m_override_key(override_key) {}
  c10::OperatorHandle m_op;
  // Holds a copy of the table's kernel (and its functor): the table's entry is
  // overwritten when the override registers, which leaves the copy valid; only
  // the entry's destruction (the op deregistered) would invalidate it. Kept as
  // torch returns it: torch 2.11 has no SafeKernelFunction::kernelFunction().
  c10::SafeKernelFunction m_kernel;
  c10::DispatchKey m_key;
  c10::DispatchKey m_override_key;
};

}  // namespace forge::package
