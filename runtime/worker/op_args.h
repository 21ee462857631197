// The op under evaluation, torch side, in four pieces (docs/WORKER.md):
//   op_spec.h    parsing: the request's op and argument records (the
//                capture's, docs/CAPTURE.md) into the call spec; the family
//   cases.h      case planning: samples, fresh values, the size sweep,
//                specials, storage offsets; each case's inputs
//   abi_views.h  ABI views: forge_tensor/forge_scalar (runtime/abi/forge_kernel.h),
//                buffers from the exchange arena between guards, poison
//   compare.h    comparison: tolerances, the stock reference, outputs against it
// This header includes all four, for evaluate.cpp, the checks and the package
// (runtime/package/override.cpp).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "abi_views.h"
#include "cases.h"
#include "compare.h"
#include "evaluator.h"
#include "forge_kernel.h"
#include "op_spec.h"
