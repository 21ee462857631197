#include "runner_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace forge::worker {
namespace {

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

std::string runner_path() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "forge_runner").string();
}

std::unique_ptr<Runner> Runner::spawn(const std::string& exe, bool cuda, int device) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
  int log = ::memfd_create("forge-runner-log", MFD_CLOEXEC);
  if (log < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  const std::string dev = std::to_string(device);
  std::vector<std::string> args = {exe, "--fd", "3", "--backend", cuda ? "cuda" : "cpu", "--device", dev};
  // The runner's environment: only what the loader and the CUDA driver need.
  // Nothing of the user's (API keys, forge's own variables) is there to read.
  std::vector<std::string> env;
  for (const char* name : {"LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "FORGE_SANDBOX_DIAGNOSE"})
    if (const char* v = std::getenv(name)) env.push_back(std::string(name) + "=" + v);
  // Every module of the candidate loads with it, before the sandbox forbids opening files.
  env.push_back("CUDA_MODULE_LOADING=EAGER");
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // The child: fd 0 /dev/null, 1 and 2 the log, 3 the socket, nothing else.
    int null = ::open("/dev/null", O_RDONLY);
    if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(log, 1) < 0 || ::dup2(log, 2) < 0 || ::dup2(sv[1], 3) < 0)
      ::_exit(127);
    ::close_range(4, ~0u, 0);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    ::execve(exe.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(sv[1]);
  std::unique_ptr<Runner> r(new Runner);
  r->m_sock = sv[0];
  r->m_log = log;
  r->m_pid = pid;
  return r;
}

Runner::~Runner() {
  kill_now();
  if (m_sock >= 0) ::close(m_sock);
  if (m_log >= 0) ::close(m_log);
}

void Runner::kill_now() {
  if (m_pid <= 0) return;
  ::kill(m_pid, SIGKILL);
  int status = 0;
  ::waitpid(m_pid, &status, 0);
  m_pid = -1;
}

std::string Runner::log_tail(size_t max_chars) const {
  if (m_log < 0) return {};
  off_t size = ::lseek(m_log, 0, SEEK_END);
  if (size <= 0) return {};
  off_t from = size > static_cast<off_t>(4096) ? size - 4096 : 0;
  std::string text(static_cast<size_t>(size - from), '\0');
  ssize_t n = ::pread(m_log, text.data(), text.size(), from);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
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
  tail = one_line(tail);
  return tail.size() > max_chars ? tail.substr(tail.size() - max_chars) : tail;
}

// The runner is gone (or going): reap it and say how it ended.
RunnerResult Runner::died() {
  RunnerResult r;
  int status = 0;
  bool reaped = false;
  for (int i = 0; i < 200 && !reaped && m_pid > 0; ++i) {
    reaped = ::waitpid(m_pid, &status, WNOHANG) == m_pid;
    if (!reaped) ::usleep(5000);
  }
  if (!reaped) {
    kill_now();
    r.reason = "crashed (closed its socket and was killed)";
  } else {
    m_pid = -1;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS) {
      r.reason = "forbidden";
      r.detail = "the candidate made a system call the sandbox refuses (the runner was killed by SIGSYS)";
    } else if (WIFSIGNALED(status)) {
      const int sig = WTERMSIG(status);
      r.reason = "crashed (signal " + std::to_string(sig) + ": " + ::strsignal(sig) + ")";
    } else {
      r.reason = "crashed (exit code " + std::to_string(WEXITSTATUS(status)) + ")";
    }
  }
  std::string tail = log_tail();
  if (!tail.empty()) r.detail += (r.detail.empty() ? "" : "; ") + std::string("its log: ") + tail;
  if (r.detail.empty()) r.detail = "the candidate's runner printed nothing before it died";
  return r;
}

RunnerResult Runner::exchange(runner::Request& q, int fd, double timeout_s) {
  RunnerResult r;
  if (m_pid <= 0) {
    r.reason = "crashed";
    r.detail = "the runner is gone";
    return r;
  }
  q.magic = runner::kMagic;
  q.seq = ++m_seq;
  // Anything already waiting was sent without being asked for.
  pollfd early{m_sock, POLLIN, 0};
  if (::poll(&early, 1, 0) > 0 && (early.revents & POLLIN)) {
    kill_now();
    r.reason = "forbidden";
    r.detail = "the runner sent a message nobody asked for (a forged reply?)";
    return r;
  }
  iovec iov{&q, sizeof q};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  const double t0 = now_us();
  if (::sendmsg(m_sock, &m, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof q)) return died();
  const double deadline = t0 + timeout_s * 1e6;
  for (;;) {
    double left_ms = (deadline - now_us()) / 1000.0;
    if (left_ms <= 0) {
      kill_now();
      r.reason = "timeout";
      r.detail = "no reply within " + std::to_string(static_cast<long>(timeout_s)) +
                 " s; the candidate's runner was killed";
      return r;
    }
    pollfd p{m_sock, POLLIN, static_cast<short>(0)};
    int n = ::poll(&p, 1, static_cast<int>(left_ms) + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) break;
  }
  ssize_t got = ::recv(m_sock, &r.reply, sizeof r.reply, 0);
  r.round_trip_us = now_us() - t0;
  if (got == 0 || (got < 0 && errno != EAGAIN)) return died();
  if (got != static_cast<ssize_t>(sizeof r.reply) || r.reply.magic != runner::kMagic || r.reply.seq != q.seq ||
      r.reply.cmd != q.cmd) {
    kill_now();
    r.reason = "forbidden";
    r.detail = "the runner's reply is not the one asked for (a forged reply?)";
    return r;
  }
  r.ok = true;
  return r;
}

RunnerResult Runner::attach(const Arena& arena, double timeout_s) {
  auto q = std::make_unique<runner::Request>();
  std::memset(q.get(), 0, sizeof *q);
  q->cmd = runner::Cmd::Attach;
  q->arena_bytes = arena.capacity();
  if (arena.ipc_handle()) std::memcpy(q->ipc, arena.ipc_handle(), static_cast<size_t>(arena.ipc_bytes()));
  return exchange(*q, arena.fd(), timeout_s);
}

RunnerResult Runner::load(const std::string& path, double timeout_s) {
  auto q = std::make_unique<runner::Request>();
  std::memset(q.get(), 0, sizeof *q);
  q->cmd = runner::Cmd::Load;
  if (path.size() >= sizeof q->path) {
    RunnerResult r;
    r.reason = "bad_candidate";
    r.detail = "the candidate's path is too long";
    return r;
  }
  std::memcpy(q->path, path.c_str(), path.size() + 1);
  return exchange(*q, -1, timeout_s);
}

RunnerResult Runner::request(runner::Request& q, double timeout_s) { return exchange(q, -1, timeout_s); }

std::string Runner::finish(double timeout_s) {
  if (m_pid <= 0) return "the runner is gone";
  auto q = std::make_unique<runner::Request>();
  std::memset(q.get(), 0, sizeof *q);
  q->cmd = runner::Cmd::Quit;
  RunnerResult r = exchange(*q, -1, timeout_s);
  if (!r.ok) return r.reason + ": " + r.detail;
  // After Bye the runner exits; a message after it was never asked for.
  pollfd p{m_sock, POLLIN, 0};
  int n = ::poll(&p, 1, 200);
  if (n > 0 && (p.revents & POLLIN)) {
    char byte;
    if (::recv(m_sock, &byte, 1, MSG_DONTWAIT) > 0) {
      kill_now();
      return "forbidden: the runner sent a message nobody asked for (a forged reply?)";
    }
  }
  kill_now();
  return {};
}

RunnerPool::RunnerPool(std::string exe, bool cuda, int device)
    : m_exe(std::move(exe)), m_cuda(cuda), m_device(device) {}

std::unique_ptr<Runner> RunnerPool::take() {
  std::unique_ptr<Runner> r = m_next ? std::move(m_next) : Runner::spawn(m_exe, m_cuda, m_device);
  m_next = Runner::spawn(m_exe, m_cuda, m_device);
  return r;
}

}  // namespace forge::worker
