// What the commands that evaluate kernels against captured targets share
// (`forge try`, `forge replay`, `forge bisect`): a session that has looked up
// the last capture without running anything, then, once the command knows what
// it will evaluate, the evaluation worker and an executor for it. Every
// evaluation goes through rules/evaluate/evaluate.h, so its steps are cached by content.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/session.h"
#include "rules/evaluate/evaluate.h"
#include "rules/evaluate/family.h"

namespace forge::cli {

struct EvalSession {
  std::unique_ptr<Session> session;
  std::vector<Family> families;        // the strategy library's
  std::unique_ptr<Executor> executor;  // after start_evaluating()
  BuildContext& ctx() { return *session->ctx; }
};

// Opens the manifest's store for writing, probes, and looks up the capture
// (dry: nothing runs). Throws Error when torch is not importable.
std::unique_ptr<EvalSession> open_eval_session(const Invocation& inv);

// From here on steps run: builds the worker (cached) and starts an executor.
// Throws Error when the worker is not available.
void start_evaluating(EvalSession& s);

// The captured target named on the command line (id or unique prefix); a clear
// error when its model has not been captured.
const Target& find_target(BuildContext& ctx, const std::string& name);

// The backend a target's tensors live on, as captured.
bool target_on_cuda(const Target& t);

// The candidate language of a file name: .cu CUDA, .cpp/.cc/.cxx C++.
std::optional<CandidateLang> lang_of(const std::filesystem::path& file);

// The family the target is verified under (rules/evaluate/family.h,
// family_of): its op's family.yaml, else the derived one; nullopt, with
// *why_not, when the candidate ABI cannot express the call.
std::optional<Family> family_for(const EvalSession& s, const Target& t, std::string* why_not = nullptr);

// One candidate against `target`: the evaluation record of rules/evaluate/evaluate.h.
// Needs start_evaluating(); `family` defaults to family_for(t) (an Error when
// there is none).
nlohmann::json evaluate_source(EvalSession& s, const Target& target, const CandidateSource& src,
                               const EvalSettings& settings, const Family* family = nullptr);

// Whether the record's step came from the cache: the evaluation's, else the
// compile's (a compile error), else null (a static-check rejection runs none).
nlohmann::json record_cached(const nlohmann::json& rec);

}  // namespace forge::cli
