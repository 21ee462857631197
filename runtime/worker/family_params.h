// The worker's view of a family (targets/<family>/family.yaml, as the request's
// JSON "family"): the verification parameters the cases are planned from, the
// signature family (runtime/common/signature_family.h) and the tolerances.
// Torch-free, so forge's unit tests read it as the worker does.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../common/signature_family.h"
#include "evaluator.h"

namespace forge::worker {

struct Family {
  std::vector<int64_t> edge_sizes;
  std::vector<std::pair<double, double>> ranges{{-3.0, 3.0}};
  int seeds = 1;
  std::vector<std::string> specials;
  // signature_family: the varied dims the edge cases sweep, and the pinned
  // ints an edge case sets with the size (group_norm's N is its input's dim 0).
  family::SignatureFamily sig;
  std::pair<int64_t, int64_t> int_range{0, 16};  // [lo, hi) for integer tensors
  // [lo, hi) per integer tensor argument (by index), from the captured
  // samples' values (sample_int_ranges, cases.h): a fresh index stays one the
  // op accepts (a class index outside [0, C) trips a device assert). Where
  // present it takes int_range's place for that argument.
  std::map<int, std::pair<int64_t, int64_t>> arg_int_range;
  // Arguments (by index) fresh cases take from the first sample instead of
  // random values (verify.keep_args: a chain's Python numbers, eps and factors).
  std::vector<int> keep_args;
  json tolerance = json::object();
  // compare_float64 (compare.h): an element outside the tolerance of stock
  // passes when inside it of the op's float64 evaluation.
  bool compare_float64 = false;
};

// Reads the request's "family" (null: the defaults). Throws RequestError when
// it is malformed.
Family parse_family(const json& family);

}  // namespace forge::worker
