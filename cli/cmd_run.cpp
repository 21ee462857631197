#include "cli/cmd_run.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "engine/environment.h"
#include "engine/manifest.h"
#include "rules/capture/model_command.h"
#include "rules/package/package.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace forge::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void print_calls(const json& merged) {
  std::fprintf(stderr, "forge run: %-40s %9s %9s  %s\n", "target", "forged", "errors", "signature");
  for (const auto& e : merged["entries"]) {
    std::fprintf(stderr, "forge run: %-40s %9ld %9ld  %s\n", e.value("target", "").c_str(),
                 e.value("forged", 0L), e.value("kernel_errors", 0L),
                 e.value("signature", "").c_str());
    if (long n = e.value("more_threads", 0L))
      std::fprintf(stderr,
                   "forge run: %-40s %9s %9s  to stock %ld×: torch had more than the %d intra-op thread(s) "
                   "stock had when this single-threaded kernel beat it (OMP_NUM_THREADS=%d uses it)\n",
                   "", "-", "-", n, e.value("stock_threads", 0), e.value("stock_threads", 0));
  }
  for (const auto& f : merged["fallback"])
    std::fprintf(stderr, "forge run: %-40s %9s %9s  fell back %ld× (%s)\n",
                 f.value("op", "").c_str(), "-", "-", f.value("calls", 0L),
                 f.value("signature", "").c_str());
}

}  // namespace

int cmd_run(const Invocation& inv) {
  std::optional<fs::path> json_report;
  bool unchecked = false;
  size_t i = 0;
  for (; i < inv.args.size() && inv.args[i] != "--"; ++i) {
    if (inv.args[i] == "--json-report" && i + 1 < inv.args.size())
      json_report = fs::absolute(inv.args[++i]);
    else if (inv.args[i] == "--unchecked")
      unchecked = true;
    else
      throw UsageError("unexpected argument '" + inv.args[i] + "' for 'run' (the command goes after --)");
  }
  if (i + 1 >= inv.args.size()) throw UsageError("run needs a command after --: forge run -- python app.py");
  Manifest m = load_manifest(inv.dir / "forge.yaml");
  const fs::path lib = package_dir(m) / "libforge.so";
  const bool have_lib = fs::exists(lib);
  std::string none;
  const bool no_package = !have_lib && read_file(package_dir(m) / kNoPackageFile, &none);
  if (!have_lib && !no_package)
    throw Error("no package at " + lib.string() + ": run `forge build` first (it packages the accepted kernels)");
  // The last build decided on no library (e.g. every forged kernel made its
  // model slower end to end): the command runs with no forge library loaded.
  if (no_package)
    std::fprintf(stderr, "forge: no package: %s; running the command without it\n",
                 none.substr(0, none.find('\n')).c_str());
  // A package whose end-to-end check failed (a model crashed or its outputs
  // differed with the library loaded) is not loaded into the user's program.
  if (auto failed = failed_package_check(m); failed && !unchecked)
    throw Error("the end-to-end check of this package failed for " + *failed +
                "; fix it and run `forge build`, or pass --unchecked to load it anyway");

  const fs::path reports = m.store / "tmp" / ("run-" + std::to_string(::getpid()));
  fs::create_directories(reports);
  Command c;
  c.argv.assign(inv.args.begin() + static_cast<long>(i) + 1, inv.args.end());
  c.inherit_stdio = true;
  c.cwd = inv.dir;  // -C DIR: as if started in DIR (the manifest's folder)
  // The torch the package was built against comes first (libforge.so is bound
  // to its ABI), as for the model commands forge runs itself; with no package
  // too, so the command runs with the Python its check ran with.
  c.env["PATH"] = forge_path_env();
  if (!no_package) {
    add_autoload_env(c, {lib.string()});
    c.env["FORGE_PACKAGE_REPORT"] = reports.string();
  }
  CommandResult r = make_process_runner()->run(c);
  json merged = merge_package_reports(reports);
  std::error_code ec;
  fs::remove_all(reports, ec);
  if (!no_package) print_calls(merged);
  if (json_report) write_file_atomic(*json_report, merged.dump(2) + "\n");
  if (r.status == CommandResult::Status::FailedToStart)
    throw Error("cannot start '" + c.argv[0] + "': " + r.describe());
  if (r.status == CommandResult::Status::Signaled) return 128 + r.signal;
  return r.exit_code;
}

}  // namespace forge::cli
