#include "rules/cluster/slurm_executor.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include "rules/cluster/slurm_queue.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string last_line(const fs::path& log) {
  std::string text;
  if (!read_file(log, &text)) return "";
  while (!text.empty() && text.back() == '\n') text.pop_back();
  auto nl = text.rfind('\n');
  std::string line = nl == std::string::npos ? text : text.substr(nl + 1);
  return line.size() > 300 ? line.substr(0, 300) : line;
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// One request's journey through Slurm.
struct Task {
  fs::path dir;
  std::string job;        // the job id of the array holding its current attempt
  int attempts = 1;       // submissions so far
  int unexplained = 0;    // polls without the exit file although squeue says it ended / forgot it
  bool done = false;
  std::vector<std::string> history;  // "job 12_3: CANCELLED (reason)" per failed attempt
};

class SlurmExecutor : public Executor {
 public:
  explicit SlurmExecutor(SlurmExecutorOptions options) : m_options(std::move(options)) {
    if (!m_options.runner) {
      m_own_runner = make_process_runner();
      m_options.runner = m_own_runner.get();
    }
    if (m_options.slurm.max_parallel < 1) m_options.slurm.max_parallel = 1;
  }

  std::string fingerprint() const override {
    // Results measured on another partition (other GPUs) are not this one's.
    return "slurm|" + m_options.slurm.partition + "|" + m_options.slurm.gres + "|" +
           m_options.fingerprint;
  }

  json worker_info() const override {
    std::lock_guard lock(m_mutex);
    return m_hello.is_null() ? json::object() : m_hello;
  }

  EvalResult evaluate(const EvalRequest& request) override {
    return evaluate_batch({request}).front();
  }

  std::vector<EvalResult> evaluate_batch(const std::vector<EvalRequest>& requests) override {
    std::vector<EvalResult> results(requests.size());
    if (requests.empty()) return results;
    const fs::path batch = new_batch_dir();
    std::vector<Task> tasks(requests.size());
    double max_timeout = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      Task& t = tasks[i];
      t.dir = batch / std::to_string(i);
      fs::create_directories(t.dir);
      json req = requests[i].to_json();
      req["id"] = "1";
      const double timeout = requests[i].timeout_seconds + m_options.start_timeout_seconds;
      max_timeout = std::max(max_timeout, timeout);
      write_file_atomic(t.dir / "request.jsonl", req.dump() + "\n");
      write_file_atomic(t.dir / "timeout", std::to_string(static_cast<long>(std::ceil(timeout))));
    }
    const fs::path script = batch / "job.sh";
    write_file_atomic(script, job_script(batch));
    fs::permissions(script, fs::perms::owner_all, fs::perm_options::add);

    SlurmQueue queue(*m_options.runner);
    SignalWatch watch;
    std::vector<int> all;
    for (size_t i = 0; i < tasks.size(); ++i) all.push_back(static_cast<int>(i));
    const double started = now_seconds();
    submit(queue, batch, script, all, tasks, max_timeout);

    for (;;) {
      if (SignalWatch::interrupted()) {
        cancel_live(queue, tasks);
        watch.reraise();
        throw Error("interrupted; Slurm jobs cancelled");
      }
      // Finished tasks, from their files.
      std::map<std::string, std::vector<int>> live;  // job -> indices
      for (size_t i = 0; i < tasks.size(); ++i) {
        Task& t = tasks[i];
        if (t.done) continue;
        if (fs::exists(t.dir / "exit")) {
          results[i] = finish(t, now_seconds() - started);
          t.done = true;
          continue;
        }
        live[t.job].push_back(static_cast<int>(i));
      }
      if (live.empty()) break;

      // Why the others are not done yet.
      std::vector<int> retry;
      for (const auto& [job, indices] : live) {
        std::string error;
        auto states = queue.states(job, &error);
        for (int i : indices) {
          Task& t = tasks[i];
          auto it = states.find(i);
          const bool known = it != states.end();
          if (known && !slurm_state_final(it->second.state)) {
            t.unexplained = 0;
            continue;
          }
          // Ended (or forgotten) without the exit file: give a shared
          // filesystem a few polls to show it, then call it a failure.
          if (++t.unexplained < 3 || fs::exists(t.dir / "exit")) continue;
          const std::string state = known ? it->second.state : "LOST";
          const std::string why = known ? it->second.reason : (error.empty() ? "not in squeue" : error);
          t.history.push_back("job " + job + "_" + std::to_string(i) + ": " + state + " (" + why + ")");
          const bool again = t.attempts <= m_options.slurm.retries;
          warn("slurm: evaluation job " + job + "_" + std::to_string(i) + " ended " + state + " (" +
               why + ") without a reply" +
               (again ? "; retrying (" + std::to_string(t.attempts) + " of " +
                            std::to_string(m_options.slurm.retries) + ")"
                      : "; giving up after " + std::to_string(t.attempts) + " attempts"));
          if (again) {
            retry.push_back(i);
          } else {
            EvalResult& r = results[i];
            r.verdict = "error";
            r.reason = "slurm_" + lower(state.substr(0, state.find(' ')));
            r.detail = join_history(t.history);
            r.seconds = now_seconds() - started;
            t.done = true;
          }
        }
      }
      if (!retry.empty()) {
        for (int i : retry) {
          tasks[i].unexplained = 0;
          ++tasks[i].attempts;
          std::error_code ec;
          for (const char* f : {"reply.jsonl", "reply.part", "exit", "devices"})
            fs::remove(tasks[i].dir / f, ec);
        }
        submit(queue, batch, script, retry, tasks, max_timeout);
      }
      sleep_interruptible(m_options.slurm.poll_seconds);
    }
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].history.empty()) continue;
      json notes = results[i].reply.is_object() ? results[i].reply.value("notes", json::array())
                                                : json::array();
      for (const auto& h : tasks[i].history) notes.push_back("slurm retried after " + h);
      if (results[i].reply.is_object()) results[i].reply["notes"] = notes;
    }
    return results;
  }

 private:
  fs::path new_batch_dir() {
    static std::atomic<int> counter{0};
    const auto stamp = std::chrono::system_clock::now().time_since_epoch().count();
    fs::path dir = m_options.work_dir / (std::to_string(stamp) + "-" + std::to_string(::getpid()) +
                                         "-" + std::to_string(counter++));
    fs::create_directories(dir);
    return dir;
  }

  std::string job_script(const fs::path& batch) const {
    std::string s = "#!/bin/bash\n# forge evaluation job (rules/cluster/slurm_executor.h)\n";
    s += "d=" + quoted(batch.string()) + "/${SLURM_ARRAY_TASK_ID:-0}\n";
    s += "cd \"$d\" || exit 1\n";
    s += "rm -f reply.jsonl exit\n";
    s += "printf '%s\\n' \"${CUDA_VISIBLE_DEVICES-}\" > devices\n";
    for (const auto& [k, v] : m_options.env) s += "export " + k + "=" + quoted(v) + "\n";
    s += "timeout -k 5 \"$(cat timeout)\" " + quoted(m_options.worker.string());
    for (const auto& a : m_options.args) s += " " + quoted(a);
    s += " < request.jsonl > reply.part 2>> worker.log\n";
    s += "rc=$?\nmv -f reply.part reply.jsonl\n";
    s += "echo \"$rc\" > exit.part && mv -f exit.part exit\n";
    return s;
  }

  void submit(SlurmQueue& queue, const fs::path& batch, const fs::path& script,
              const std::vector<int>& indices, std::vector<Task>& tasks, double max_timeout) {
    const SlurmOptions& o = m_options.slurm;
    std::vector<std::string> args = {"--job-name=forge-eval",
                                     "--output=" + (batch / "slurm-%A_%a.out").string(),
                                     "--array=" + slurm_array_spec(indices, o.max_parallel)};
    if (!o.partition.empty()) args.push_back("--partition=" + o.partition);
    if (!o.account.empty()) args.push_back("--account=" + o.account);
    if (!o.gres.empty()) args.push_back("--gres=" + o.gres);
    // The job's limit leaves the worker's own timeout (start + request) room
    // to fire first, so a hang is the candidate's "timeout", not Slurm's.
    args.push_back("--time=" + (o.time_limit.empty()
                                    ? std::to_string(static_cast<long>(std::ceil(max_timeout / 60.0)) + 1)
                                    : o.time_limit));
    args.insert(args.end(), o.sbatch_args.begin(), o.sbatch_args.end());
    const std::string job = queue.submit(args, script);
    for (int i : indices) tasks[i].job = job;
    std::lock_guard lock(m_mutex);
    ++m_submissions;
  }

  void cancel_live(SlurmQueue& queue, const std::vector<Task>& tasks) {
    std::vector<std::string> ids;
    for (size_t i = 0; i < tasks.size(); ++i)
      if (!tasks[i].done) ids.push_back(tasks[i].job + "_" + std::to_string(i));
    queue.cancel(ids);
  }

  EvalResult finish(const Task& t, double wall) {
    EvalResult res;
    res.seconds = wall;
    std::string exit_text, replies;
    read_file(t.dir / "exit", &exit_text);
    read_file(t.dir / "reply.jsonl", &replies);
    const int rc = std::atoi(exit_text.c_str());
    json hello, reply;
    size_t start = 0;
    while (start < replies.size()) {
      size_t end = replies.find('\n', start);
      json v = json::parse(replies.substr(start, end - start), nullptr, false);
      if (v.is_object() && v.contains("hello") && hello.is_null()) hello = v;
      if (v.is_object() && v.contains("id") && v["id"] == "1") reply = v;
      if (end == std::string::npos) break;
      start = end + 1;
    }
    const std::string log_line = last_line(t.dir / "worker.log");
    if (!hello.is_null()) {
      std::lock_guard lock(m_mutex);
      m_hello = hello;
    }
    if (reply.is_object()) {
      res = eval_result_from_reply(reply);
      res.seconds = reply.value("seconds", wall);
    } else if (hello.is_null()) {
      res.verdict = "error";
      res.reason = "worker_failed_to_start";
      res.detail = "on the node (exit status " + std::to_string(rc) + "): " + log_line;
    } else if (rc == 124 || rc == 137) {
      res.verdict = "rejected";
      res.reason = "timeout";
      res.detail = "no reply in time on the node";
    } else if (rc > 128) {
      res.verdict = "rejected";
      res.reason = "crashed (signal " + std::to_string(rc - 128) + ": " + ::strsignal(rc - 128) + ")";
      res.detail = log_line;
    } else {
      res.verdict = "rejected";
      res.reason = "crashed (exit code " + std::to_string(rc) + ")";
      res.detail = log_line;
    }
    if (!res.reply.is_object()) res.reply = json::object();
    std::string devices;
    if (read_file(t.dir / "devices", &devices)) {
      while (!devices.empty() && devices.back() == '\n') devices.pop_back();
      res.reply["cuda_visible_devices"] = devices;
    }
    return res;
  }

  void sleep_interruptible(double seconds) {
    const double until = now_seconds() + seconds;
    while (now_seconds() < until && !SignalWatch::interrupted())
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  void warn(const std::string& message) const {
    if (m_options.warn) m_options.warn(message);
  }

  static std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  static std::string join_history(const std::vector<std::string>& h) {
    std::string out;
    for (const auto& x : h) out += (out.empty() ? "" : "; ") + x;
    return out;
  }

  SlurmExecutorOptions m_options;
  std::unique_ptr<CommandRunner> m_own_runner;
  mutable std::mutex m_mutex;
  json m_hello;
  int m_submissions = 0;
};

}  // namespace

std::unique_ptr<Executor> make_slurm_executor(SlurmExecutorOptions options) {
  return std::make_unique<SlurmExecutor>(std::move(options));
}

}  // namespace forge
