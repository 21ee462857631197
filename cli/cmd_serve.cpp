#include "cli/cmd_serve.h"

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "cli/session.h"
#include "rules/history/repo.h"
#include "rules/rules.h"
#include "serve/gui_server.h"
#include "util/error.h"

namespace forge::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct ServeArgs {
  int port = 7878;
  std::string bind = "127.0.0.1";
};

ServeArgs parse_args(const Invocation& inv) {
  ServeArgs a;
  for (size_t i = 0; i < inv.args.size(); ++i) {
    const std::string& arg = inv.args[i];
    if (arg == "--port" && i + 1 < inv.args.size()) {
      const std::string& v = inv.args[++i];
      size_t used = 0;
      int n = -1;
      try {
        n = std::stoi(v, &used);
      } catch (const std::exception&) {
      }
      if (used != v.size() || n < 0 || n > 65535)
        throw UsageError("--port needs a port number (0 = any free one), got '" + v + "'");
      a.port = n;
    } else if (arg == "--bind" && i + 1 < inv.args.size()) {
      a.bind = inv.args[++i];
    } else {
      throw UsageError("unexpected argument '" + arg + "' for 'serve'");
    }
  }
  return a;
}

// Values the GUI must never show: every env: value of every model, and the
// model API key (read from the variable forge.yaml names).
std::vector<std::string> secrets_of(const Manifest& m) {
  std::vector<std::string> out;
  for (const auto& model : m.models)
    for (const auto& [name, value] : model.env) out.push_back(value);
  if (m.proposer.llm && !m.proposer.llm->api_key_env.empty())
    if (const char* key = std::getenv(m.proposer.llm->api_key_env.c_str())) out.push_back(key);
  return out;
}

fs::path git_dir_of(const fs::path& repo) {
  std::error_code ec;
  if (repo.empty()) return {};
  return fs::is_directory(repo / ".git", ec) ? repo / ".git" : repo;
}

fs::path gui_dir() {
  if (const char* dir = std::getenv("FORGE_GUI_DIR")) return dir;
  return fs::path(FORGE_SOURCE_DIR) / "gui" / "dist";
}

// What `forge status --all --json` shows, plus the device and the notes.
json dry_run_overview(Session& s) {
  BuildOptions options;
  options.dry_run = true;
  BuildContext ctx{s.manifest, *s.builder, *s.runner, s.ctx->toolchain, s.ctx->device, options};
  json report = run_build(ctx, default_rules(false));
  return {{"device", report["device"]}, {"torch", report["torch"]},
          {"models", report["models"]}, {"targets", report["targets"]},
          {"not_selected", report["not_selected"]},
          {"notes", report["notes"]},   {"manifest", s.manifest.path.string()}};
}

}  // namespace

int cmd_serve(const Invocation& inv) {
  const ServeArgs args = parse_args(inv);
  serve::ServeOptions options;
  options.bind = args.bind;
  options.port = args.port;
  options.static_dir = gui_dir();
  if (!serve::is_loopback(args.bind)) options.token = serve::make_token();
  if (!fs::exists(options.static_dir / "index.html"))
    throw Error("the GUI's files are missing: no " + (options.static_dir / "index.html").string() +
                " (build them with `npm ci && npm run build` in gui/)");

  // SIGINT/SIGTERM end the server from a thread of their own, not a handler.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  BuildOptions dry;
  dry.dry_run = true;
  auto s = open_session(inv, Access::Read, dry);
  serve::ApiConfig config;
  config.store_root = s->manifest.store;
  config.history_ref = s->manifest.history.ref;
  fs::path repo = locate_history_repo(s->manifest, false);
  config.history_repo = repo.empty() ? s->manifest.store / "history.git" : repo;
  config.secrets = secrets_of(s->manifest);
  if (s->manifest.proposer.llm) {
    config.price_in = s->manifest.proposer.llm->price_in;
    config.price_out = s->manifest.proposer.llm->price_out;
  }
  serve::GuiApi api(*s->store, config);
  api.set_overview(dry_run_overview(*s));
  serve::StoreWatch watch(config.store_root, git_dir_of(config.history_repo), config.history_ref);
  serve::GuiServer server(api, watch, options, [&s] { return dry_run_overview(*s); });
  const int port = server.bind();

  const std::string host =
      args.bind.find(':') != std::string::npos ? "[" + args.bind + "]" : args.bind;
  std::string url = "http://" + host + ":" + std::to_string(port) + "/";
  if (!options.token.empty()) url += "?token=" + options.token;
  if (inv.json)
    std::cout << json{{"url", url}, {"port", port}, {"bind", args.bind}}.dump() << std::endl;
  else
    std::cout << "forge serve: " << url << "  (Ctrl-C stops)" << std::endl;

  std::thread waiter([&server, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.stop();
  });
  server.run();
  // Wake the waiter if the server ended on its own.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  return 0;
}

}  // namespace forge::cli
