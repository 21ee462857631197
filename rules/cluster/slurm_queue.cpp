#include "rules/cluster/slurm_queue.h"

#include <algorithm>
#include <mutex>

#include "util/error.h"
#include "util/strings.h"

namespace forge {

namespace {

std::string trim_copy(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = s.find_first_not_of(' ');
  return i == std::string::npos ? "" : s.substr(i);
}

std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "2-5%2" or "1,3" or "7" -> indices.
std::vector<int> expand_range(std::string spec) {
  spec = spec.substr(0, spec.find('%'));
  std::vector<int> out;
  for (const auto& part : split_on(spec, ',')) {
    auto dash = part.find('-');
    std::string a = part.substr(0, dash), b = dash == std::string::npos ? a : part.substr(dash + 1);
    if (!all_digits(a) || !all_digits(b)) continue;
    for (int i = std::stoi(a); i <= std::stoi(b) && out.size() < 100000; ++i) out.push_back(i);
  }
  return out;
}

std::mutex g_watch_mutex;
int g_watch_count = 0;
struct sigaction g_old_int {}, g_old_term {};

}  // namespace

bool slurm_state_final(const std::string& state) {
  static const char* kFinal[] = {"COMPLETED", "FAILED",        "CANCELLED", "TIMEOUT",
                                 "PREEMPTED", "NODE_FAIL",     "BOOT_FAIL", "DEADLINE",
                                 "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED"};
  // squeue may print "CANCELLED by 0".
  const std::string word = state.substr(0, state.find(' '));
  return std::any_of(std::begin(kFinal), std::end(kFinal), [&](const char* s) { return word == s; });
}

std::map<int, SlurmTaskState> parse_squeue(const std::string& out, const std::string& job_id) {
  std::map<int, SlurmTaskState> states;
  for (const auto& raw : split_on(out, '\n')) {
    std::string line = trim_copy(raw);
    auto fields = split_on(line, '|');
    if (fields.size() < 3) continue;
    const std::string& id = fields[0];
    SlurmTaskState st{trim_copy(fields[1]), trim_copy(fields[2])};
    if (id == job_id) {
      states[0] = st;
      continue;
    }
    if (id.rfind(job_id + "_", 0) != 0) continue;
    std::string task = id.substr(job_id.size() + 1);
    if (task.size() > 2 && task.front() == '[' && task.back() == ']') {
      for (int i : expand_range(task.substr(1, task.size() - 2))) states[i] = st;
    } else if (all_digits(task)) {
      states[std::stoi(task)] = st;
    }
  }
  return states;
}

std::string slurm_array_spec(const std::vector<int>& indices, int limit) {
  std::vector<int> v = indices;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string spec;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!spec.empty()) spec += ",";
    spec += std::to_string(v[i]);
    if (j > i) spec += "-" + std::to_string(v[j]);
    i = j + 1;
  }
  if (limit > 0) spec += "%" + std::to_string(limit);
  return spec;
}

std::string SlurmQueue::submit(const std::vector<std::string>& args,
                               const std::filesystem::path& script) {
  Command c;
  c.argv = {"sbatch", "--parsable"};
  c.argv.insert(c.argv.end(), args.begin(), args.end());
  c.argv.push_back(script.string());
  c.timeout_seconds = 60;
  CommandResult r = m_runner.run(c);
  std::string id = trim_copy(r.out);
  id = id.substr(0, id.find(';'));  // "123;cluster" on multi-cluster setups
  if (!r.ok() || !all_digits(id))
    throw Error("sbatch failed (" + r.describe() + "): " + trim_copy(r.err + " " + r.out));
  return id;
}

std::map<int, SlurmTaskState> SlurmQueue::states(const std::string& job_id, std::string* error) {
  Command c;
  c.argv = {"squeue", "-h", "-t", "all", "-j", job_id, "-o", "%i|%T|%r"};
  c.timeout_seconds = 30;
  CommandResult r = m_runner.run(c);
  if (!r.ok()) {
    // "Invalid job id specified": slurmctld has forgotten the job.
    if (error) *error = trim_copy(r.err.empty() ? r.describe() : r.err);
    return {};
  }
  return parse_squeue(r.out, job_id);
}

void SlurmQueue::cancel(const std::vector<std::string>& job_ids) {
  if (job_ids.empty()) return;
  Command c;
  c.argv = {"scancel"};
  c.argv.insert(c.argv.end(), job_ids.begin(), job_ids.end());
  c.timeout_seconds = 30;
  m_runner.run(c);
}

std::atomic<int> SignalWatch::s_signal{0};

void SignalWatch::on_signal(int sig) { s_signal.store(sig); }

SignalWatch::SignalWatch() {
  std::lock_guard lock(g_watch_mutex);
  if (g_watch_count++ > 0) return;
  s_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = &SignalWatch::on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

SignalWatch::~SignalWatch() {
  if (m_released) return;
  std::lock_guard lock(g_watch_mutex);
  if (g_watch_count == 0 || --g_watch_count > 0) return;  // 0: reraise() restored them
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

void SignalWatch::reraise() {
  int sig = s_signal.load();
  {
    std::lock_guard lock(g_watch_mutex);
    m_released = true;
    g_watch_count = 0;
    sigaction(SIGINT, &g_old_int, nullptr);
    sigaction(SIGTERM, &g_old_term, nullptr);
  }
  if (sig) std::raise(sig);
}

}  // namespace forge
