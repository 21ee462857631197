// The capture's samples: copies of a call's real inputs, taken in the start
// callback (inputs() is valid only there, and in-place ops have not yet changed
// them), written as <pid>-<n>.bin within the per-process byte cap and recorded
// on the entry as {"inputs": [...]} (docs/CAPTURE.md, "Samples"). A tensor over
// the per-tensor limit is stored in part (runtime/common/sample_part.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "op_facts.h"
#include "state.h"

namespace forge::capture {

// A sample: the call's inputs, with tensor values copied to host memory.
struct Sample {
  std::string json;  // {"inputs":[...]}
  std::vector<std::pair<std::string, at::Tensor>> files;  // path -> contiguous CPU tensor
  int64_t bytes = 0;
};

// Whether the current CUDA stream is capturing a graph (a copy would break it).
bool in_graph_capture(c10::ArrayRef<const c10::IValue> inputs, bool any_cuda);

// Copies the call's inputs, each tensor whole or its leading part. Returns
// nullopt when the byte cap does not allow even that.
// `snapshot`: the copies must not share memory with the inputs.
std::optional<Sample> take_sample(State& st, const OpInfo& op, c10::ArrayRef<const c10::IValue> inputs,
                                  bool snapshot);

// What commit_sample recorded, for withdraw_sample: empty json if nothing.
struct Committed {
  std::string json;
  std::vector<std::string> files;
  int64_t bytes = 0;
};

// Writes the sample's files (within the byte cap) and records it on the entry.
Committed commit_sample(State& st, Entry* e, Sample& s);

// Undoes commit_sample: the entry's record, the files and the bytes. Whether
// it was there to undo.
bool withdraw_sample(State& st, Entry* e, const Committed& c);

}  // namespace forge::capture
