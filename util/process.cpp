#include "util/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "util/interrupt.h"

extern char** environ;

namespace forge {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> build_env(const Command& c) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& name : c.unset_env) env.erase(name);
  for (const auto& [k, v] : c.env) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// Reads whatever is ready on the pipes; closes them at EOF.
void drain(std::vector<pollfd>& fds, int out_fd, CommandResult& r) {
  for (auto& f : fds) {
    if (f.fd < 0) continue;
    pollfd one{f.fd, POLLIN, 0};
    while (::poll(&one, 1, 0) > 0 && (one.revents & (POLLIN | POLLHUP))) {
      char buf[65536];
      ssize_t n = ::read(f.fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(f.fd);
        f.fd = -1;
        break;
      }
      (f.fd == out_fd ? r.out : r.err).append(buf, static_cast<size_t>(n));
    }
  }
}

int open_out(const std::filesystem::path& p) {
  return ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

class ProcessRunner : public CommandRunner {
 public:
  CommandResult run(const Command& c) override {
    CommandResult r;
    auto start = Clock::now();
    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    const bool cap_out = !c.inherit_stdio && !c.stdout_path;
    const bool cap_err = !c.inherit_stdio && !c.stderr_path;
    if ((cap_out && ::pipe2(out_pipe, O_CLOEXEC) != 0) ||
        (cap_err && ::pipe2(err_pipe, O_CLOEXEC) != 0)) {
      r.err = std::string("pipe: ") + std::strerror(errno);
      return r;
    }
    // Prepare everything the child needs before fork (no allocation after).
    std::vector<std::string> env = build_env(c);
    std::vector<char*> envp, argv;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = c.argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    int out_fd = c.stdout_path ? open_out(*c.stdout_path) : -1;
    int err_fd = c.stderr_path ? open_out(*c.stderr_path) : -1;
    // PATH lookup uses the child's PATH when the command sets one.
    std::string path_env = c.env.count("PATH") ? c.env.at("PATH") : "";

    pid_t pid = ::fork();
    if (pid < 0) {
      r.err = std::string("fork: ") + std::strerror(errno);
      return r;
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      if (!c.inherit_stdio) {
        int devnull = ::open("/dev/null", O_RDONLY);
        ::dup2(devnull, 0);
      }
      if (cap_out) ::dup2(out_pipe[1], 1);
      if (cap_err) ::dup2(err_pipe[1], 2);
      if (out_fd >= 0) ::dup2(out_fd, 1);
      if (err_fd >= 0) ::dup2(err_fd, 2);
      if (!c.cwd.empty() && ::chdir(c.cwd.c_str()) != 0) {
        dprintf(2, "forge: cannot enter %s: %s\n", c.cwd.c_str(), std::strerror(errno));
        ::_exit(127);
      }
      if (!path_env.empty()) ::setenv("PATH", path_env.c_str(), 1);
      ::execvpe(argv[0], argv.data(), envp.data());
      dprintf(2, "forge: cannot run %s: %s\n", argv[0], std::strerror(errno));
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    if (out_fd >= 0) ::close(out_fd);
    if (err_fd >= 0) ::close(err_fd);
    if (cap_out) ::close(out_pipe[1]);
    if (cap_err) ::close(err_pipe[1]);

    bool timed_out = false;
    auto deadline = start + std::chrono::duration<double>(c.timeout_seconds);
    std::vector<pollfd> fds;
    if (cap_out) fds.push_back({out_pipe[0], POLLIN, 0});
    if (cap_err) fds.push_back({err_pipe[0], POLLIN, 0});
    int status = 0;
    bool reaped = false;
    // SIGTERM to the command's group, up to a second to exit, then SIGKILL.
    const auto stop_group = [&] {
      ::kill(-pid, SIGTERM);
      for (int i = 0; i < 20 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) ::usleep(50000);
      ::kill(-pid, SIGKILL);
    };
    while (true) {
      int wait_ms = 100;
      if (interrupted()) {  // the build stops (util/interrupt.h): so does the command
        stop_group();
        break;
      }
      if (c.timeout_seconds > 0) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) {
          timed_out = true;
          stop_group();
          break;
        }
        wait_ms = static_cast<int>(std::min<long>(left.count(), 100));
      }
      bool open_fds = false;
      for (auto& f : fds) open_fds |= f.fd >= 0;
      if (open_fds) {
        ::poll(fds.data(), fds.size(), wait_ms);
        drain(fds, out_pipe[0], r);
      } else {
        ::usleep(20000);
      }
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        reaped = true;
        // A grandchild may still hold the pipes open: take what is there, don't wait on it.
        drain(fds, out_pipe[0], r);
        break;
      }
    }
    for (auto& f : fds)
      if (f.fd >= 0) ::close(f.fd);
    if (!reaped) ::waitpid(pid, &status, 0);
    // Children the command left behind in its group do not outlive the step.
    ::kill(-pid, SIGKILL);
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (timed_out) {
      r.status = CommandResult::Status::TimedOut;
    } else if (WIFEXITED(status)) {
      r.status = CommandResult::Status::Exited;
      r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      r.status = CommandResult::Status::Signaled;
      r.signal = WTERMSIG(status);
    }
    return r;
  }
};

}  // namespace

std::string CommandResult::describe() const {
  switch (status) {
    case Status::Exited:
      return "exit code " + std::to_string(exit_code);
    case Status::Signaled:
      return "killed by signal " + std::to_string(signal) + " (" + ::strsignal(signal) + ")";
    case Status::TimedOut:
      return "timed out after " + std::to_string(static_cast<long>(seconds)) + " s";
    case Status::FailedToStart:
      return "failed to start: " + err;
  }
  return "unknown";
}

std::unique_ptr<CommandRunner> make_process_runner() { return std::make_unique<ProcessRunner>(); }

std::vector<std::string> shell_argv(const std::string& text) { return {"/bin/sh", "-c", text}; }

}  // namespace forge
