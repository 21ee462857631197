// A candidate kernel library: the ELF import check and dlopen. Torch-free.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "forge_kernel.h"

namespace forge::worker {

using ForgeKernelFn = int (*)(const forge_call*);
using ForgeWorkspaceFn = int64_t (*)(const forge_call*);

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

// Threads of this process (entries of /proc/self/task), or -1 when unknown.
int count_threads();

// dlopen(RTLD_NOW | RTLD_LOCAL) of a private copy of the file, and the entry
// points. The copy (in $TMPDIR or /tmp) is unlinked right after loading, so a
// later candidate at the same path is always loaded afresh. The library is
// never unloaded: a thread or a pending callback the candidate left behind
// must not jump into unmapped code while a later request runs (the worker is
// restarted often enough that the mappings do not pile up).
class Candidate {
 public:
  static std::unique_ptr<Candidate> open(const std::string& path, Refusal* why);
  ~Candidate() = default;
  Candidate(const Candidate&) = delete;
  Candidate& operator=(const Candidate&) = delete;

  ForgeKernelFn kernel() const { return m_kernel; }
  ForgeWorkspaceFn workspace_bytes() const { return m_workspace; }  // may be null

 private:
  Candidate() = default;
  void* m_handle = nullptr;
  ForgeKernelFn m_kernel = nullptr;
  ForgeWorkspaceFn m_workspace = nullptr;
};

}  // namespace forge::worker
