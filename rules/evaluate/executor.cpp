#include "rules/evaluate/executor.h"

#include "rules/evaluate/worker_client.h"

namespace forge {
using nlohmann::json;

json EvalRequest::to_json() const {
  json r = {{"cmd", "evaluate"},
            {"op", op},
            {"overload", overload},
            {"args", args},
            {"samples", samples},
            {"family", family},
            {"candidate", candidate.string()},
            {"seed", seed},
            {"bench", bench}};
  if (mode != "evaluate") r["mode"] = mode;
  if (!chain.is_null()) r["chain"] = chain;
  return r;
}

namespace {

class LocalExecutor : public Executor {
 public:
  explicit LocalExecutor(LocalExecutorOptions options)
      : m_options(std::move(options)), m_worker([this] {
          WorkerCommand c;
          c.argv = {m_options.worker.string()};
          c.argv.insert(c.argv.end(), m_options.args.begin(), m_options.args.end());
          c.env = m_options.env;
          c.log = m_options.log;
          c.start_timeout_seconds = m_options.start_timeout_seconds;
          return c;
        }()) {}

  std::string fingerprint() const override { return "local|" + m_options.fingerprint; }

  json worker_info() const override {
    return m_worker.hello().is_null() ? json::object() : m_worker.hello();
  }

  EvalResult evaluate(const EvalRequest& request) override {
    EvalResult res;
    WorkerReply reply = m_worker.request(request.to_json(), request.timeout_seconds);
    res.seconds = reply.seconds;
    switch (reply.status) {
      case WorkerReply::Status::Ok:
        break;
      case WorkerReply::Status::StartFailed:
        res.verdict = "error";
        res.reason = reply.reason;
        res.detail = reply.detail;
        return res;
      default:  // timeout, crash, garbage: the candidate's doing; the worker is gone
        res.verdict = "rejected";
        res.reason = reply.reason;
        res.detail = reply.detail;
        return res;
    }
    bool restart = false;
    EvalResult out = eval_result_from_reply(reply.value, &restart);
    out.seconds = reply.seconds;
    if (restart || (out.verdict == "rejected" && m_options.restart_after_rejection))
      m_worker.stop();
    return out;
  }

 private:
  LocalExecutorOptions m_options;
  WorkerProcess m_worker;
};

}  // namespace

EvalResult eval_result_from_reply(const json& v, bool* restart) {
  EvalResult res;
  bool stop = false;
  res.reply = v;
  if (v.contains("error")) {
    // The worker refused forge's request: nothing is known about the candidate.
    // "refused": "memory": the call is too large to verify on this device.
    res.verdict = "error";
    res.reason = v.value("refused", "") == "memory" ? "too_large" : "worker_error";
    res.detail = v["error"].is_string() ? v["error"].get<std::string>() : v["error"].dump();
  } else {
    res.verdict = v.value("verdict", "");
    res.reason = v.value("reason", "");
    res.detail = v.value("detail", "");
    res.verify = v.contains("verify") ? v["verify"] : json();
    res.bench = v.contains("bench") ? v["bench"] : json();
    if (res.verdict != "accepted" && res.verdict != "rejected") {
      stop = true;
      res.verdict = "rejected";
      res.reason = "worker_protocol";
      res.detail = "a reply without a verdict: " + v.dump().substr(0, 200);
    } else if (v.value("worker_exits", false)) {
      // The judge exits only for its own faults: a candidate's crash, CUDA
      // error or stray thread ends its runner (docs/WORKER.md).
      stop = true;
    }
  }
  if (restart) *restart = stop;
  return res;
}

std::unique_ptr<Executor> make_local_executor(LocalExecutorOptions options) {
  return std::make_unique<LocalExecutor>(std::move(options));
}

}  // namespace forge
