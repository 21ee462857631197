// Sending candidates straight to the real worker, the import check off, for
// the run-time check suites (test_runtime_checks_cpu.cpp, _cuda.cpp).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "rules/capture/runtime_build.h"

namespace forge::test {

// The worker forge built last from this checkout (the newest forge_worker
// under forge's cache with its forge_runner beside it, configured from this
// source tree's runtime/worker: another checkout sharing the cache builds its
// own, against its own torch); empty when there is none.
inline std::filesystem::path newest_worker() {
  namespace fs = std::filesystem;
  const std::string home = "CMAKE_HOME_DIRECTORY:INTERNAL=" + (fs::path(FORGE_SOURCE_DIR) / "runtime" / "worker").string();
  auto from_here = [&](const fs::path& build) {
    std::ifstream cache(build / "CMakeCache.txt");
    std::string line;
    while (std::getline(cache, line))
      if (line == home) return true;
    return false;
  };
  fs::path best;
  fs::file_time_type when{};
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(user_cache_dir() / "runtime", ec)) {
    if (e.path().filename() != "forge_worker" || !fs::exists(e.path().parent_path() / "forge_runner")) continue;
    if (!from_here(e.path().parent_path())) continue;
    auto t = fs::last_write_time(e.path(), ec);
    if (best.empty() || t > when) best = e.path(), when = t;
  }
  return best;
}

// `reason` starts with one of the '|'-separated alternatives of `expected`.
inline bool reason_matches(const std::string& reason, const std::string& expected) {
  std::stringstream alts(expected);
  std::string alt;
  while (std::getline(alts, alt, '|'))
    if (!alt.empty() && reason.rfind(alt, 0) == 0) return true;
  return false;
}

// `cu` compiled as rules/evaluate/compile.cpp compiles CUDA candidates (sm_90a) into `so`.
inline bool compile_cuda_candidate(const std::filesystem::path& cu, const std::filesystem::path& so) {
  const std::string cc = "nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -cudart shared "
                         "-gencode=arch=compute_90a,code=sm_90a -I'" +
                         (std::filesystem::path(FORGE_SOURCE_DIR) / "runtime" / "abi").string() + "' -o '" +
                         so.string() + "' '" + cu.string() + "' 2>&1";
  return std::system(cc.c_str()) == 0;
}

// The worker's evaluate request for candidate `so` on `op` with `args`, a
// fixed seed and a short benchmark.
inline nlohmann::json evaluate_request(const std::string& id, const std::string& op, const nlohmann::json& args,
                                       const nlohmann::json& family, const std::filesystem::path& so) {
  return {{"cmd", "evaluate"},
          {"id", id},
          {"op", op},
          {"args", args},
          {"samples", nlohmann::json::array()},
          {"family", family},
          {"candidate", so.string()},
          {"seed", 7},
          {"call_timeout_seconds", 10},
          {"bench", {{"warmup", 3}, {"reps", 20}, {"min_seconds", 0.1}, {"max_seconds", 5}}}};
}

// One worker process for all requests (a candidate's crash ends only its
// runner); the replies by id. `extra_args` e.g. "--backend cpu --ceiling 1e10".
inline std::map<std::string, nlohmann::json> evaluate_directly(const std::filesystem::path& worker,
                                                                const std::vector<nlohmann::json>& requests,
                                                                const std::filesystem::path& dir,
                                                                const std::string& extra_args) {
  {
    std::ofstream out(dir / "requests.jsonl");
    for (const auto& r : requests) out << r.dump() << "\n";
  }
  const std::string cmd = "'" + worker.string() + "' " + extra_args + " --no-import-check < '" +
                          (dir / "requests.jsonl").string() + "' > '" + (dir / "replies.jsonl").string() + "' 2> '" +
                          (dir / "worker.log").string() + "'";
  std::map<std::string, nlohmann::json> replies;
  if (std::system(cmd.c_str()) != 0) return replies;
  std::ifstream in(dir / "replies.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto r = nlohmann::json::parse(line, nullptr, false);
    if (r.is_object() && r.contains("id") && r["id"].is_string()) replies[r["id"].get<std::string>()] = r;
  }
  return replies;
}

}  // namespace forge::test
