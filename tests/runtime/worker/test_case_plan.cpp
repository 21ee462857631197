// The worker's case planning (runtime/worker/case_plan.h), directly and
// without torch: the plans' order, names, seeds and ranges, the size sweep of
// a varied dim and its memory budget, and the notes for what is skipped.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/worker/case_plan.h"

namespace forge::worker {

TEST_SUITE_BEGIN("runtime::CasePlan");

namespace {

// _softmax(self [4, 128] float32, dim=1, half_to_float=false).
std::vector<PlanArg> softmax_args() {
  return {{"self", true, {4, 128}, 4}, {"dim", false, {}, 0}, {"half_to_float", false, {}, 0}};
}

Family family_of(const char* text) { return parse_family(json::parse(text)); }

std::vector<std::string> names(const std::vector<CasePlan>& plans) {
  std::vector<std::string> out;
  for (const auto& p : plans) out.push_back(p.name);
  return out;
}

}  // namespace

TEST_CASE("plans come in protocol order: samples, fresh seeds x ranges, edges, specials, storage offset") {
  const Family f = family_of(R"({"verify": {"ranges": [[-3, 3], [-100, 100]], "seeds": 2, "edge_sizes": [1, 3, 17],
                                            "specials": ["neg_inf_row", "bogus"]},
                                 "signature_family": {"vary": [{"arg": 0, "dim": 0}]}})");
  std::vector<std::string> notes;
  const auto plans = plan_cases(softmax_args(), json::array({json::array(), json::array()}), f, 5, notes);
  // 2 samples, 2 seeds x 2 ranges, every extent 1..64 but the captured 4, a special, the offset.
  REQUIRE(plans.size() == 2 + 4 + 63 + 1 + 1);
  const auto n = names(plans);
  CHECK(n[0] == "sample 0");
  CHECK(n[1] == "sample 1");
  CHECK(n[2] == "fresh seed=0 range=[-3,3]");
  CHECK(n[3] == "fresh seed=0 range=[-100,100]");
  CHECK(n[5] == "fresh seed=1 range=[-100,100]");
  CHECK(n[6] == "edge self.size(0)=1");
  CHECK(n[8] == "edge self.size(0)=3");
  CHECK(n[9] == "edge self.size(0)=5");  // 4 is the captured extent: the samples and fresh cases
  CHECK(n[68] == "edge self.size(0)=64");
  CHECK(n[69] == "special neg_inf_row");
  CHECK(n[70] == "special storage_offset");
  CHECK(notes == std::vector<std::string>{"unknown special \"bogus\" ignored"});

  // Seeds follow from the request's seed and the position; ranges from the family.
  CHECK(plans[0].seed == 5ull * 1000003ull + 1 * 7919ull);
  CHECK(plans[70].seed == 5ull * 1000003ull + 71 * 7919ull);
  CHECK(plans[0].kind == CasePlan::Sample);
  CHECK(plans[1].sample == 1);
  CHECK(plans[3].kind == CasePlan::Fresh);
  CHECK(plans[3].lo == -100);
  CHECK(plans[3].hi == 100);
  const CasePlan& edge = plans[8];
  CHECK(edge.kind == CasePlan::Edge);
  CHECK(edge.edge_arg == 0);
  CHECK(edge.edge_dim == 0);
  CHECK(edge.edge_size == 3);
  CHECK(edge.edge_vary == 0);
  CHECK(edge.lo == -3);  // the first range
  CHECK(plans[70].shift_elems == 1);
  CHECK(plans[69].shift_elems == 0);
}

TEST_CASE("without samples or a varied dim: fresh cases, specials and the storage offset") {
  std::vector<std::string> notes;
  const auto plans = plan_cases(softmax_args(), json(), Family{}, 1, notes);
  CHECK(names(plans) == std::vector<std::string>{"fresh seed=0 range=[-3,3]", "special storage_offset"});
  CHECK(notes.empty());
}

TEST_CASE("a varied dim of a non-tensor or beyond the rank is noted, a negative one counts from the end") {
  const Family f = family_of(R"({"signature_family": {"vary": [{"arg": 1, "dim": 0}, {"arg": 0, "dim": 2},
                                                                {"arg": 0, "dim": -1}]}})");
  std::vector<std::string> notes;
  const auto plans = plan_cases(softmax_args(), json(), f, 1, notes);
  CHECK(notes == std::vector<std::string>{"signature_family.vary: arg 1 is not a tensor argument; ignored",
                                          "signature_family.vary: arg 0 has no dim 2"});
  const auto edge = std::find_if(plans.begin(), plans.end(), [](const CasePlan& p) { return p.kind == CasePlan::Edge; });
  REQUIRE(edge != plans.end());
  CHECK(edge->edge_dim == 1);
  CHECK(edge->edge_vary == 2);
  CHECK(edge->name == "edge self.size(1)=1");
}

TEST_CASE("the sweep: 1..64, powers of two +-1 up to 4x the captured extent, within the memory budget") {
  std::vector<std::string> notes;
  // Captured 100 rows: up to 400, so 127, 128, 129, 255, 256, 257 and 400.
  const PlanArg rows{"self", true, {100, 8}, 4};
  auto sizes = sweep_sizes(rows, 0, {1000}, notes);
  CHECK(sizes.size() == 64 + 6 + 1 + 1);
  CHECK(sizes.front() == 1);
  CHECK(std::find(sizes.begin(), sizes.end(), 100) == sizes.end());
  for (int64_t s : {64, 127, 128, 129, 255, 256, 257, 400, 1000})
    CHECK(std::find(sizes.begin(), sizes.end(), s) != sizes.end());
  CHECK(std::find(sizes.begin(), sizes.end(), 511) == sizes.end());
  CHECK(notes.empty());

  // One 16 MiB row captured: the budget (64 MiB) keeps 2..4 rows and drops 60.
  const PlanArg huge{"self", true, {1, int64_t(4) << 20}, 4};
  sizes = sweep_sizes(huge, 0, {}, notes);
  CHECK(sizes == std::vector<int64_t>{2, 3, 4});
  CHECK(notes == std::vector<std::string>{"self.size(0): 60 sizes above the verification budget left out"});
}

TEST_CASE("known specials are the ones the cases can make") {
  for (const char* s : {"neg_inf_row", "pos_inf", "nan", "mostly_neg_inf_row", "causal"}) CHECK(known_special(s));
  CHECK_FALSE(known_special("storage_offset"));
  CHECK_FALSE(known_special("bogus"));
}

TEST_SUITE_END();

}  // namespace forge::worker
