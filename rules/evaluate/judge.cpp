#include "rules/evaluate/judge.h"

#include <stdexcept>

#include "rules/evaluate/evaluate.h"

namespace forge {
using nlohmann::json;

namespace {

mcts::Outcome::Status status_of(const json& rec) {
  using S = mcts::Outcome::Status;
  const std::string verdict = rec.value("verdict", "");
  const std::string reason = rec.value("reason", "");
  if (verdict == "accepted") return rec.value("bench", json::object()).value("faster", false) ? S::Ok : S::NotFaster;
  if (reason == "static_check") return S::StaticReject;
  if (reason == "compile_error") return S::CompileError;
  if (reason == "timeout") return S::Timeout;
  if (reason.rfind("crashed", 0) == 0 || reason == "cuda_error") return S::Crash;
  return S::WrongResult;
}

}  // namespace

mcts::Outcome judge_candidate(BuildContext& ctx, Executor& executor, const Target& target,
                              const Family& family, const CandidateSource& src, json* record) {
  json rec = evaluate_candidates(ctx, executor, target, family, {src}).front();
  if (rec.value("verdict", "") == "error" && rec.value("reason", "") == "too_large")
    throw TooLargeToVerify(rec.value("detail", ""));
  if (rec.value("verdict", "") == "error")
    throw std::runtime_error("could not evaluate " + src.name + ": " + rec.value("detail", ""));
  mcts::Outcome out;
  out.status = status_of(rec);
  out.reason = rec.value("reason", "") + (rec.contains("detail") ? ": " + rec.value("detail", "") : "");
  if (out.verified()) {
    double sp = rec.value("bench", json::object()).value("speedup_eager", 0.0);
    out.speedup = sp > 0 ? sp : 1e-6;
  }
  out.steps = {{"file", src.name},
               {"source", ctx.builder.store().put_object(src.text)},
               {"evaluation", ctx.builder.store().put_object(rec.dump())}};
  if (record) *record = std::move(rec);
  return out;
}

}  // namespace forge
