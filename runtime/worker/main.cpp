// forge_worker: the evaluation worker's protocol loop (docs/WORKER.md).
//
//   forge_worker [--backend cpu|cuda|auto] [--ceiling BYTES_PER_S] [--device N] [--no-import-check]
//
// JSON lines: one request per line on stdin, exactly one reply line per request
// on stdout, the hello line first; logs on stderr. Candidate code never runs in
// this process (it runs in forge_runner, docs/WORKER.md); the protocol still
// gets private file descriptors (fd 1 pointed at stderr, fd 0 at /dev/null),
// so nothing the worker loads can print into the stream. Torch-free: the
// evaluation is in evaluate.cpp behind evaluator.h.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "evaluator.h"

namespace forge::worker {

namespace {

FILE* g_out = nullptr;

void write_line(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  s += '\n';
  std::fwrite(s.data(), 1, s.size(), g_out);
  std::fflush(g_out);
}

}  // namespace

void reply_and_exit(const json& reply, int code) {
  json r = reply;
  r["worker_exits"] = true;  // forge: this worker is gone after this line
  write_line(r);
  std::fprintf(stderr, "forge_worker: exiting after %s (status %d)\n", reply.value("reason", std::string("?")).c_str(),
               code);
  std::fflush(stderr);
  std::_Exit(code);
}

namespace {

// Moves the protocol to private descriptors. Returns false on failure.
bool private_stdio(FILE** in, FILE** out) {
  int pin = ::fcntl(0, F_DUPFD_CLOEXEC, 3);
  int pout = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
  if (pin < 0 || pout < 0) return false;
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(2, 1) < 0) return false;
  ::close(devnull);
  *in = ::fdopen(pin, "r");
  *out = ::fdopen(pout, "w");
  return *in && *out;
}

int usage(const char* msg) {
  std::fprintf(stderr, "forge_worker: %s\nusage: forge_worker [--backend cpu|cuda|auto] [--ceiling BYTES_PER_S] [--device N] [--no-import-check]\n",
               msg);
  return 2;
}

}  // namespace
}  // namespace forge::worker

int main(int argc, char** argv) {
  using namespace forge::worker;
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--backend") {
      const char* v = next();
      if (!v) return usage("--backend needs a value");
      opt.backend = v;
    } else if (a == "--ceiling") {
      const char* v = next();
      if (!v) return usage("--ceiling needs a value");
      opt.ceiling = std::strtod(v, nullptr);
    } else if (a == "--device") {
      const char* v = next();
      if (!v) return usage("--device needs a value");
      opt.device_index = std::atoi(v);
    } else if (a == "--no-import-check") {
      opt.import_check = false;  // lets tests reach the run-time checks with candidates the ELF check refuses
    } else if (a == "--help" || a == "-h") {
      return usage("the evaluation worker of forge (docs/WORKER.md)");
    } else {
      return usage(("unknown argument " + a).c_str());
    }
  }

  FILE* in = nullptr;
  if (!private_stdio(&in, &g_out)) {
    std::perror("forge_worker: cannot set up the protocol descriptors");
    return 2;
  }

  std::unique_ptr<Evaluator> ev;
  try {
    ev = make_evaluator(opt);
    write_line(ev->hello());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "forge_worker: %s\n", e.what());
    return 2;
  }

  char* buf = nullptr;
  size_t cap = 0;
  ssize_t n;
  while ((n = ::getline(&buf, &cap, in)) >= 0) {
    std::string line(buf, static_cast<size_t>(n));
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    json req;
    json id;
    try {
      req = json::parse(line);
    } catch (const json::exception& e) {
      write_line({{"id", nullptr}, {"error", std::string("bad JSON: ") + e.what()}});
      continue;
    }
    if (req.is_object() && req.contains("id")) id = req["id"];
    if (!req.is_object() || !req.contains("cmd") || !req["cmd"].is_string()) {
      write_line({{"id", id}, {"error", "a request is an object with a string \"cmd\""}});
      continue;
    }
    std::string cmd = req["cmd"].get<std::string>();
    if (cmd == "ping") {
      write_line({{"id", id}, {"ok", true}});
    } else if (cmd == "quit") {
      write_line({{"id", id}, {"ok", true}});
      std::free(buf);
      return 0;
    } else if (cmd == "evaluate") {
      Outcome out;
      try {
        out = ev->evaluate(req);
      } catch (const MemoryRefused& e) {
        write_line({{"id", id}, {"error", e.what()}, {"refused", "memory"}});
        continue;
      } catch (const RequestError& e) {
        write_line({{"id", id}, {"error", e.what()}});
        continue;
      } catch (const std::exception& e) {
        write_line({{"id", id}, {"error", std::string("internal error: ") + e.what()}});
        continue;
      }
      if (out.exit_code >= 0) reply_and_exit(out.reply, out.exit_code);
      write_line(out.reply);
    } else {
      write_line({{"id", id}, {"error", "unknown cmd \"" + cmd + "\" (evaluate, ping, quit)"}});
    }
  }
  std::free(buf);
  return 0;
}
