// Parsing squeue's output and writing sbatch's --array spec; no Slurm needed.
#include <doctest/doctest.h>

#include "rules/cluster/slurm_queue.h"

namespace forge {

TEST_SUITE_BEGIN("rules::SlurmQueue");

TEST_CASE("squeue lines of a job array become per-task states") {
  const std::string out =
      "12_[2-4%2]|PENDING|JobArrayTaskLimit\n"
      "12_0|RUNNING|None\n"
      "12_1|TIMEOUT|TimeLimit\n"
      "13_0|RUNNING|None\n"
      "120_5|RUNNING|None\n";
  auto s = parse_squeue(out, "12");
  REQUIRE(s.size() == 5);
  CHECK(s[0].state == "RUNNING");
  CHECK(s[1].state == "TIMEOUT");
  CHECK(s[1].reason == "TimeLimit");
  CHECK(s[3].state == "PENDING");
  CHECK(s[4].reason == "JobArrayTaskLimit");
  CHECK(parse_squeue("7|CANCELLED|None\n", "7")[0].state == "CANCELLED");
  CHECK(parse_squeue("12_[1,3]|PENDING|Priority\n", "12").size() == 2);
  CHECK(parse_squeue("garbage\n\n", "12").empty());
}

TEST_CASE("final states") {
  for (const char* s : {"COMPLETED", "CANCELLED", "CANCELLED by 0", "TIMEOUT", "PREEMPTED",
                        "NODE_FAIL", "OUT_OF_MEMORY", "FAILED"})
    CHECK(slurm_state_final(s));
  for (const char* s : {"PENDING", "RUNNING", "COMPLETING", "REQUEUED", "SUSPENDED", "CONFIGURING"})
    CHECK_FALSE(slurm_state_final(s));
}

TEST_CASE("array specs: ranges, lists and the concurrency limit") {
  CHECK(slurm_array_spec({0, 1, 2, 3}, 2) == "0-3%2");
  CHECK(slurm_array_spec({5, 0, 1, 2}, 0) == "0-2,5");
  CHECK(slurm_array_spec({3}, 4) == "3%4");
}

TEST_SUITE_END();

}  // namespace forge
