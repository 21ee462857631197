// The stock kernels behind forge's overrides: what a call outside every forged
// signature family runs. Registering our kernel at aten's CPU/CUDA key replaces
// the stock one in the dispatcher, so it is called directly through the
// per-backend entry points ATen exports (at::cpu::<op>, at::cuda::<op>),
// one small adapter per op family forge can package.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace forge::package {

// Runs the stock `op` ("aten::_softmax", "aten::mean.dim") on the boxed
// arguments `args` (all schema arguments, in order) for the backend.
using StockFn = std::vector<c10::IValue> (*)(const std::vector<c10::IValue>& args);

// nullptr when forge has no stock adapter for the op on that backend (then the
// op is not overridden at all: nothing could run the calls the guard refuses).
StockFn stock_kernel(const std::string& op, bool cuda);

}  // namespace forge::package
