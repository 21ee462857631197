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

// A tensor input of a call (or an element of a tensor-list input), as the
// start callback saw it: the dispatcher frees the boxed inputs before the end
// callback. Identified by its storage, so a read through any view counts.
struct FlowInput {
  int index = 0;                  // the argument's position
  const void* storage = nullptr;  // its StorageImpl
};
std::vector<FlowInput> flow_inputs(c10::ArrayRef<c10::IValue> inputs);

// One call of `e` ended: each input whose storage the last recorded producer
// returned as output k of entry p, while that storage lives, counts as an
// edge (p, k) -> (e, input index). With `produces`, each tensor output of the
// call (rf's outputs, valid in the end callback) is then recorded as produced
// by (e, output index); a view's output is not (it shares its input's
// storage, whose producer stays). Call under st.mu.
void note_flow_locked(State& st, Entry* e, const std::vector<FlowInput>& inputs, const at::RecordFunction& rf,
                      bool produces);

// The report's "flows" array: {"from","out","to","in","calls"} per edge, its
// "produced" array: {"entry","out","tensors"} per entry output (ids as the
// report's backend_ops give them), and its "trace": {"reads": [[from_call,
// from_entry, out, to_call, to_entry, in], ...], "truncated", "open": [calls]}, the same
// reads call by call (calls numbered in the process from 1), so chains are
// found per call where entries of one signature run in several chains. The
// trace stops after 65,536 reads ("truncated"); the calls whose outputs were
// alive then are "open": their later reads are unknown. Call under st.mu.
void write_flows_locked(const State& st, std::string& js);

// A forked child starts with empty tables (recorder.cpp, fork_child), like its State.
void reset_flows();

}  // namespace forge::capture
