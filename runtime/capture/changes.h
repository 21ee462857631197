// Which inputs a call changed (docs/CAPTURE.md, "Changed inputs"). A schema
// marks the arguments an op writes (`Tensor(a!)`), but not always: batch norm
// in training mode updates running_mean and running_var with no annotation.
// So the first calls of each signature (those sampled) are watched: each
// tensor input is copied on its device before the call and compared bit for
// bit after it. A changed input is an output the kernel must produce too.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <vector>

namespace forge::capture {

// Inputs larger than this are not copied (a copy of a huge activation would
// double its memory); such an input changes unseen unless its schema marks it.
constexpr int64_t kWatchBytes = int64_t(256) << 20;

struct Watched {
  int arg = 0;        // the schema argument index
  at::Tensor live;    // the caller's tensor
  at::Tensor before;  // its copy taken before the call
};

// Copies of the call's top-level tensor inputs (up to kWatchBytes each).
std::vector<Watched> watch_inputs(c10::ArrayRef<const c10::IValue> inputs);

// The watched inputs whose bits (or sizes) differ from their copies now.
std::vector<int> changed_inputs(const std::vector<Watched>& watched);

}  // namespace forge::capture
