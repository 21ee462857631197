#include "rules/evaluate/worker_client.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

extern char** environ;

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string one_line(std::string s, size_t max = 300) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return s.size() > max ? s.substr(0, max) + "…" : s;
}

// write() all of `data` without dying of SIGPIPE when the child is gone:
// SIGPIPE is blocked for this thread during the write, and a pending one is
// consumed before the mask is restored.
bool write_all(int fd, const std::string& data) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  bool ok = true;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (!ok && errno == EPIPE) {
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) > 0) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

}  // namespace

WorkerProcess::WorkerProcess(WorkerCommand command) : m_command(std::move(command)) {}

WorkerProcess::~WorkerProcess() {
  std::lock_guard<std::mutex> lock(m_mutex);
  if (m_pid <= 0) return;
  // A polite quit first: the worker flushes its log and exits 0.
  write_all(m_in, "{\"cmd\": \"quit\"}\n");
  for (int i = 0; i < 40; ++i) {
    int status = 0;
    if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
      ::kill(-m_pid, SIGKILL);  // whatever it left in its group
      m_pid = -1;
      break;
    }
    ::usleep(25000);
  }
  if (m_pid > 0) kill_group();
  if (m_in >= 0) ::close(m_in);
  if (m_out >= 0) ::close(m_out);
}

void WorkerProcess::kill_group() {
  if (m_pid <= 0) return;
  ::kill(-m_pid, SIGTERM);
  int status = 0;
  bool reaped = false;
  for (int i = 0; i < 20 && !reaped; ++i) {
    reaped = ::waitpid(m_pid, &status, WNOHANG) == m_pid;
    if (!reaped) ::usleep(50000);
  }
  ::kill(-m_pid, SIGKILL);
  if (!reaped) ::waitpid(m_pid, &status, 0);
  m_pid = -1;
  if (m_in >= 0) ::close(m_in);
  if (m_out >= 0) ::close(m_out);
  m_in = m_out = -1;
  m_buffer.clear();
}

void WorkerProcess::stop() {
  std::lock_guard<std::mutex> lock(m_mutex);
  kill_group();
}

WorkerReply WorkerProcess::start() {
  std::lock_guard<std::mutex> lock(m_mutex);
  return start_locked();
}

WorkerReply WorkerProcess::start_locked() {
  WorkerReply r;
  if (m_pid > 0) {
    r.status = WorkerReply::Status::Ok;
    r.value = m_hello;
    return r;
  }
  const double t0 = now();
  auto fail = [&](const std::string& detail) {
    kill_group();
    r.status = WorkerReply::Status::StartFailed;
    r.reason = "worker_failed_to_start";
    r.detail = one_line(detail);
    r.seconds = now() - t0;
    return r;
  };
  if (m_command.argv.empty()) return fail("no worker command");
  std::error_code ec;
  if (m_command.log.has_parent_path()) fs::create_directories(m_command.log.parent_path(), ec);
  m_log_offset = fs::exists(m_command.log, ec) ? fs::file_size(m_command.log, ec) : 0;

  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0) return fail(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(from_child, O_CLOEXEC) != 0) {
    ::close(to_child[0]);
    ::close(to_child[1]);
    return fail(std::string("pipe: ") + std::strerror(errno));
  }
  int log_fd = ::open(m_command.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

  // Everything the child needs, prepared before fork.
  std::map<std::string, std::string> env_map;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env_map[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : m_command.env) env_map[k] = v;
  std::vector<std::string> env_strings, args = m_command.argv;
  for (const auto& [k, v] : env_map) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string path_env = env_map.count("PATH") ? env_map["PATH"] : "";

  pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1], log_fd})
      if (fd >= 0) ::close(fd);
    return fail(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(to_child[0], 0);
    ::dup2(from_child[1], 1);
    if (log_fd >= 0) ::dup2(log_fd, 2);
    if (!m_command.cwd.empty() && ::chdir(m_command.cwd.c_str()) != 0) {
      dprintf(2, "forge: cannot enter %s: %s\n", m_command.cwd.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    if (!path_env.empty()) ::setenv("PATH", path_env.c_str(), 1);
    ::execvpe(argv[0], argv.data(), envp.data());
    dprintf(2, "forge: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(to_child[0]);
  ::close(from_child[1]);
  if (log_fd >= 0) ::close(log_fd);
  m_pid = pid;
  m_in = to_child[1];
  m_out = from_child[0];
  m_buffer.clear();
  ++m_starts;

  std::string line;
  auto st = read_line(now() + m_command.start_timeout_seconds, &line);
  if (st == WorkerReply::Status::Timeout)
    return fail("no hello within " +
                std::to_string(static_cast<int>(m_command.start_timeout_seconds)) +
                " s; log: " + log_tail());
  if (st != WorkerReply::Status::Ok) {
    WorkerReply d = died(now() - t0);
    return fail(d.reason + ": " + d.detail);
  }
  json hello = json::parse(line, nullptr, false);
  if (!hello.is_object() || !hello.contains("hello"))
    return fail("the first line is not a hello: " + line);
  m_hello = hello;
  r.status = WorkerReply::Status::Ok;
  r.value = hello;
  r.seconds = now() - t0;
  return r;
}

WorkerReply::Status WorkerProcess::read_line(double deadline, std::string* line) {
  constexpr size_t kMaxLine = size_t{256} << 20;
  while (true) {
    auto nl = m_buffer.find('\n');
    if (nl != std::string::npos) {
      *line = m_buffer.substr(0, nl);
      m_buffer.erase(0, nl + 1);
      if (!line->empty() && line->back() == '\r') line->pop_back();
      return WorkerReply::Status::Ok;
    }
    if (m_buffer.size() > kMaxLine) {
      *line = m_buffer.substr(0, 200);
      return WorkerReply::Status::Protocol;
    }
    const double left = deadline - now();
    if (left <= 0) return WorkerReply::Status::Timeout;
    pollfd p{m_out, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min(left * 1000 + 1, 1000.0)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char buf[65536];
    ssize_t got = ::read(m_out, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return WorkerReply::Status::Crashed;  // EOF: the child is gone
    m_buffer.append(buf, static_cast<size_t>(got));
  }
}

std::string WorkerProcess::log_tail() const {
  std::ifstream in(m_command.log, std::ios::binary);
  if (!in) return "";
  in.seekg(static_cast<std::streamoff>(m_log_offset));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The last three non-empty lines.
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string l = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (l.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(l);
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  std::string tail;
  for (size_t i = lines.size() > 3 ? lines.size() - 3 : 0; i < lines.size(); ++i)
    tail += (tail.empty() ? "" : " | ") + lines[i];
  return one_line(tail, 600);
}

WorkerReply WorkerProcess::died(double seconds) {
  WorkerReply r;
  r.status = WorkerReply::Status::Crashed;
  r.seconds = seconds;
  int status = 0;
  bool reaped = false;
  // Stdout closed: the child is exiting; give it a moment before killing.
  for (int i = 0; i < 40 && !reaped; ++i) {
    reaped = ::waitpid(m_pid, &status, WNOHANG) == m_pid;
    if (!reaped) ::usleep(25000);
  }
  if (!reaped) {
    ::kill(-m_pid, SIGKILL);
    ::waitpid(m_pid, &status, 0);
    r.reason = "crashed (closed its output and was killed)";
  } else if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    r.reason = "crashed (signal " + std::to_string(sig) + ": " + ::strsignal(sig) + ")";
  } else {
    r.reason = "crashed (exit code " + std::to_string(WEXITSTATUS(status)) + ")";
  }
  ::kill(-m_pid, SIGKILL);  // what it left in its group
  m_pid = -1;
  ::close(m_in);
  ::close(m_out);
  m_in = m_out = -1;
  m_buffer.clear();
  r.detail = log_tail();
  if (r.detail.empty()) r.detail = "the worker printed nothing to its log before it died";
  return r;
}

WorkerReply WorkerProcess::request(json request, double timeout_seconds) {
  std::lock_guard<std::mutex> lock(m_mutex);
  // A child that exited since the last request (e.g. after a sticky CUDA
  // error) is reaped here, not blamed on this request.
  if (m_pid > 0) {
    int status = 0;
    pollfd p{m_out, POLLIN, 0};
    bool eof_pending = ::poll(&p, 1, 0) > 0 && (p.revents & POLLHUP) && m_buffer.empty();
    if (::waitpid(m_pid, &status, WNOHANG) == m_pid) {
      ::kill(-m_pid, SIGKILL);
      m_pid = -1;
      ::close(m_in);
      ::close(m_out);
      m_in = m_out = -1;
      m_buffer.clear();
    } else if (eof_pending) {
      kill_group();
    }
  }
  WorkerReply started = start_locked();
  if (!started.ok()) return started;

  std::error_code ec;
  m_log_offset = fs::exists(m_command.log, ec) ? fs::file_size(m_command.log, ec) : 0;
  const double t0 = now();
  const std::string id = "r" + std::to_string(m_next_id++);
  request["id"] = id;
  WorkerReply r;
  if (!write_all(m_in, request.dump() + "\n")) return died(now() - t0);

  std::string line;
  auto st = read_line(t0 + timeout_seconds, &line);
  if (st == WorkerReply::Status::Timeout) {
    kill_group();
    r.status = st;
    r.reason = "timeout";
    r.detail = "no reply within " + std::to_string(static_cast<long>(timeout_seconds)) +
               " s; the worker was killed";
    r.seconds = now() - t0;
    return r;
  }
  if (st == WorkerReply::Status::Crashed) return died(now() - t0);
  json reply = st == WorkerReply::Status::Ok ? json::parse(line, nullptr, false) : json();
  if (!reply.is_object() || !reply.contains("id") || reply["id"] != id) {
    kill_group();
    r.status = WorkerReply::Status::Protocol;
    r.reason = "worker_protocol";
    r.detail = "unexpected line from the worker: " + one_line(line, 200);
    r.seconds = now() - t0;
    return r;
  }
  r.status = WorkerReply::Status::Ok;
  r.value = std::move(reply);
  r.seconds = now() - t0;
  return r;
}

}  // namespace forge
