// Data flow between captured calls: which entry's output each call consumes
// (docs/CAPTURE.md, "Data flow"). forge finds chains of ops worth fusing in it
// (rules/capture/chains.h). Torch-side: reads the RecordFunction's values.
#pragma once

#include <ATen/record_function.h>

#include <cstdint>
#include <string>
#include <vector>

#include "state.h"

namespace forge::capture {

// A tensor input of a call, as the start callback saw it: its boxed inputs
// are gone by the end callback (the dispatcher frees them after the start).
struct FlowInput {
  int index = 0;
  const void* data = nullptr;
  int64_t numel = 0;
  const void* storage = nullptr;  // the StorageImpl
};
std::vector<FlowInput> flow_inputs(c10::ArrayRef<c10::IValue> inputs);

// One backend call of `e` ended: each tensor input whose memory the last
// recorded call wrote as output k of entry p, and which is still that
// tensor's storage, counts as an edge (p, k) -> (e, input index); then each
// tensor output of the call (rf's outputs, valid in the end callback) is
// recorded as produced by (e, output index). Call under st.mu.
void note_flow_locked(State& st, Entry* e, const std::vector<FlowInput>& inputs, const at::RecordFunction& rf);

// The report's "flows" array: {"from","out","to","in","calls"} per edge, and
// its "produced" array: {"entry","out","tensors"} per entry output (ids as the
// report's backend_ops give them). Call under st.mu.
void write_flows_locked(const State& st, std::string& js);

// A forked child starts with empty tables (recorder.cpp, fork_child), like its State.
void reset_flows();

}  // namespace forge::capture
