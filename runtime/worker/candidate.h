// A candidate kernel library's ELF import check: a fast first filter before
// the runner loads it (the runner's sandbox does not depend on it). Torch-free.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "forge_kernel.h"

namespace forge::worker {

// Why a candidate is refused before it runs: a reply reason of docs/WORKER.md
// ("bad_candidate", "library_call") and a one-line detail.
struct Refusal {
  std::string reason;
  std::string detail;
};

// Reads the candidate's dynamic section and dynamic symbol table without
// loading it. Refuses a file that is not an ELF64 shared object, that needs a
// library computing on its behalf (torch, c10, cuBLAS, cuDNN, ... ->
// "library_call"), a thread-pool runtime (OpenMP, TBB -> "bad_candidate"), or
// that imports functions a kernel has no business calling: dlopen/dlsym
// ("library_call"); process, file, network and environment access, stream
// creation, device allocation or reset ("bad_candidate"). docs/CANDIDATE_ABI.md
// lists them. Never crashes on a malformed file.
std::optional<Refusal> check_imports(const std::string& path);

}  // namespace forge::worker
