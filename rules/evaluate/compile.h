// Compiling candidate kernels into shared libraries the worker can load.
//
// A batch of candidates becomes one generated build.ninja in a scratch folder
// under the store (<store>/build/batch-…), run once with `ninja -j N -k 0`, so
// candidates compile in parallel. Each candidate compiles in its own folder
// (u<N>/candidate.cpp); its edge sends the compiler's output verbatim to
// candidate.so.log and its exit status and wall time to candidate.so.rc, so one
// candidate's errors never mix with another's.
//
// Each candidate's compile is also a step (kind "compile") whose key covers the
// source, the exact command line, the compiler's --version, the target arch (for
// -march=native: what native resolves to on this CPU) and the ABI header, so an
// unchanged candidate never recompiles. Compile errors are deterministic and
// cached too; a batch that could not run (ninja missing, timed out) is not.
// The .so is kept in the store as an object; materialize_object() writes it back
// out, named by its digest, for the worker to dlopen.
//
// Flags: C++ `c++ -O3 -std=c++17 -fPIC -shared -march=native` (no OpenMP: its
// thread pool outlives the call, and the worker refuses libgomp); CUDA
// `nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -cudart shared
// -gencode=arch=compute_X,code=sm_X` for the device's arch (sm_90a on Hopper;
// the shared CUDA runtime is the one the worker has loaded). Both link with
// `-z defs`: a candidate that references anything its own code and the C++/CUDA
// runtimes do not define (a torch or cuBLAS symbol) fails to link.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/build.h"
#include "rules/evaluate/static_check.h"

namespace forge {

struct CandidateSource {
  std::string name;  // shown in progress and messages: "softmax_v3.cpp"
  std::string text;  // the source
  CandidateLang lang = CandidateLang::Cpp;
};

struct CompileResult {
  bool ok = false;
  bool cached = false;  // found in the action cache, nothing ran
  // "" when ok; "compile_error" (the compiler said no: cached), or
  // "compile_failed" (the compile could not run: not cached; see detail).
  std::string reason;
  std::string detail;
  std::string so_digest;          // the shared library, as a store object
  std::filesystem::path so_path;  // materialized copy (named by digest), when ok
  std::string log;                // the compiler's output, verbatim
  double seconds = 0;             // wall time of this candidate's compile when it ran
  std::string key;                // the compile step's key
};

struct CompileOptions {
  std::string cuda_arch;         // "sm_90a"; "" = the device's arch (cuda backend)
  int jobs = 0;                  // ninja -j; 0 = budget.parallel or the number of cores
  double timeout_seconds = 900;  // for the whole batch
};

// "sm_90a" -> "-gencode=arch=compute_90a,code=sm_90a"; "" when arch is not sm_NN[a-z].
std::string gencode_flag(const std::string& arch);

// The compiler's argv for `lang`, without output and input (exactly what is keyed).
std::vector<std::string> compile_flags(CandidateLang lang, const std::string& cuda_arch);

// Compiles every candidate (those not cached, in one ninja run); one result per
// source, in order. In dry mode nothing runs: uncached ones come back with
// reason "not_compiled".
std::vector<CompileResult> compile_candidates(BuildContext& ctx,
                                              const std::vector<CandidateSource>& sources,
                                              const CompileOptions& options = {});

// Compiling ahead: a batch whose ninja runs on a thread of its own, at lower
// priority, while the caller goes on (the search evaluates one candidate while
// the next ones compile). Only the ninja process belongs to that thread: the
// store and the build's steps are touched in finish(), on the caller's thread.
// Sources already cached, or that cannot compile here, are left out; at most
// `max_units` compile. Destroyed unfinished, it waits for ninja and drops the
// results (the compiles run again when needed).
class BackgroundCompile {
 public:
  BackgroundCompile(BuildContext& ctx, std::vector<CandidateSource> sources, size_t max_units,
                    const CompileOptions& options = {});
  ~BackgroundCompile();
  BackgroundCompile(const BackgroundCompile&) = delete;
  BackgroundCompile& operator=(const BackgroundCompile&) = delete;

  size_t size() const;  // candidates compiling (0 once finished, or when none needed to)
  bool compiling(const CandidateSource& src) const;
  bool ready() const;   // ninja has exited (finish() will not wait)
  // Waits for ninja, then records each result as its compile step, so
  // compile_candidates() finds it cached. Once; later calls do nothing.
  void finish();

 private:
  struct State;
  std::unique_ptr<State> m;
};

// Writes store object `digest` to <dir>/<digest><suffix> unless it is already
// there; returns the path, or "" when the object is missing from the store.
std::filesystem::path materialize_object(store::Store& store, const std::string& digest,
                                         const std::filesystem::path& dir,
                                         const std::string& suffix);

// Where forge materializes objects for the worker: <store>/build/objects.
std::filesystem::path materialize_dir(const BuildContext& ctx);

}  // namespace forge
