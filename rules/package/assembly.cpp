// Package, assembly (assembly.h).
#include "rules/package/assembly.h"

#include <unistd.h>

#include <algorithm>

#include "engine/store_json.h"
#include "rules/evaluate/compile.h"
#include "rules/evaluate/family.h"
#include "rules/improvement.h"
#include "rules/package/package.h"
#include "runtime/common/signature_family.h"
#include "util/atomic_file.h"
#include "util/hash.h"

namespace forge {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The kernel a target ships (Target::shipped: the tip of its improvement chain,
// rules/improvement.h), with its evaluation record.
const KernelRecord* shipped_kernel(BuildContext& ctx, const Target& t, json* evaluation) {
  if (!t.shipped) return nullptr;
  *evaluation = get_json_object(ctx.builder.store(), t.kernels[*t.shipped].evaluation);
  return evaluation->is_object() ? &t.kernels[*t.shipped] : nullptr;
}

// One package.json entry, or null with a note when the target cannot ship.
json package_entry(BuildContext& ctx, const Target& t, const std::vector<Family>& families,
                   const fs::path& kernels_dir) {
  json rec;
  const KernelRecord* k = shipped_kernel(ctx, t, &rec);
  if (!k) return nullptr;
  auto family = family_of(families, t);
  const std::string so = rec.value("compile", json::object()).value("so", "");
  if (!family || so.empty()) {
    ctx.notes.push_back("package: " + t.id + " has no family or compiled kernel; not packaged");
    return nullptr;
  }
  if (materialize_object(ctx.builder.store(), so, kernels_dir, ".so").empty()) {
    ctx.notes.push_back("package: the kernel of " + t.id + " is missing from the store");
    return nullptr;
  }
  // A chain's op is forge_chain::c_<digest> (rules/capture/chain_target.h), defined by libforge.so.
  const auto dot = t.chain.is_object() ? std::string::npos : t.op.find('.');
  json entry = {{"target", t.id},
               {"op", t.chain.is_object() ? t.op : "aten::" + t.op.substr(0, dot)},
               {"overload", dot == std::string::npos ? "" : t.op.substr(dot + 1)},
               {"signature", t.signature},
               {"args", t.args},
               {"outputs", t.outputs},
               {"family", family->spec},
               {"kernel", "kernels/" + so + ".so"},
               {"strategy", kernel_label(k->proposer, k->strategy, k->params)},
               {"iteration", k->iteration},
               {"speedup_eager", rec["bench"].value("speedup_eager", 0.0)},
               {"speedup_compile", t.best_speedup_compile ? json(*t.best_speedup_compile) : json(nullptr)},
               // Compiled graphs call the forged kernel only where it beat Inductor
               // (runtime/autoload/forge_autoload/compile.py reads this).
               {"under_compile", t.under_compile.empty() ? "inductor" : t.under_compile}};
  // The signature family the guard applies (vary, pins, contiguous,
  // vary_outputs: runtime/common/signature_family.h), validated when the
  // family file loaded.
  entry.update(family::to_json<json>(family::parse(family->spec.value("signature_family", json::object()))));
  // The other ops compiled graphs spell this one as (compile_baseline.h). Each
  // keeps Inductor's code under the measured choice: the per-op comparison
  // timed Inductor's code for the op alone, and a spelling such as eval batch
  // norm's _native_batch_norm_legit_no_training is where Inductor fuses the
  // op with its neighbours (docs/PACKAGE.md); FORGE_COMPILE_POLICY=forge
  // routes them. A spelling's "under_compile" set to "forge" routes it.
  if (!t.traced_as.empty()) entry["traced_as"] = t.traced_as;
  // CPU kernels are single-threaded and were timed against stock running
  // bench.threads intra-op threads: the guard takes them only in processes
  // that give stock no more threads than that (docs/PACKAGE.md).
  if (ctx.device.backend == "cpu" && rec["bench"].value("threads", 0) > 0)
    entry["stock_threads"] = rec["bench"]["threads"];
  // The largest varied extents the worker verified: the guard takes no larger
  // call, and without them only the captured extent (runtime/common/signature_family.h).
  std::string problem;
  json vary_max = package_vary_max(rec.value("verify", json::object()), entry["vary"], &problem);
  if (!vary_max.is_null()) entry["vary_max"] = std::move(vary_max);
  else if (!problem.empty()) {
    const std::string note = "package: " + t.id + ": " + problem + "; its kernel is used for the captured extent only";
    if (std::find(ctx.notes.begin(), ctx.notes.end(), note) == ctx.notes.end())  // once, not per round
      ctx.notes.push_back(note);
  }
  return entry;
}

// The chain report's entry (ctx.chains) of a chain target.
json* chain_report(BuildContext& ctx, const Target& t) {
  for (auto& c : ctx.chains)
    if (c.value("id", json()) == t.id) return &c;
  return nullptr;
}

// A chain's package entry (op forge_chain::c_<digest>, its definition). Where
// the chain is a module's whole forward its kernel replaces that forward
// (runtime/autoload/forge_autoload/modules.py); in compiled graphs it replaces
// the chain where it beat Inductor's fusion of it (compile.py, under_compile).
// Null, with the chain report's reason, when it is neither.
json chain_package_entry(BuildContext& ctx, const Target& t, const std::vector<Family>& families,
                         const fs::path& kernels_dir) {
  json* c = chain_report(ctx, t);
  if (!c || !t.shipped) return nullptr;
  auto set = [&](bool packaged, const std::string& why) {
    (*c)["why"] = "searched; " + why;
    if (c->contains("search")) (*c)["search"]["packaged"] = packaged;
  };
  const std::string compiled =
      t.under_compile == "forge"
          ? "compiled graphs call it in place of Inductor's fusion of the chain, which it beat"
      : !t.under_compile_why.empty() ? "compiled graphs keep Inductor's fusion of the chain: " + t.under_compile_why
      : t.best_speedup_compile ? "compiled graphs keep Inductor's fusion of the chain, which was as fast or faster"
                               : "compiled graphs keep Inductor's fusion of the chain (no compile figure for it)";
  const json code = c->value("module_code", json());
  const bool module = c->value("whole_forward", false) && code.is_string();
  if (!module && t.under_compile != "forge") {
    set(false, "not packaged: " +
                   std::string(c->value("whole_forward", false)
                                   ? "the capture has no digest of its module's forward code"
                                   : "its ops are not one module's whole forward") +
                   ", and " + compiled + " (its single ops stay targets)");
    return nullptr;
  }
  json entry = package_entry(ctx, t, families, kernels_dir);
  if (entry.is_null()) {
    set(false, "not packaged: its kernel could not be packaged (see the notes)");
    return nullptr;
  }
  entry["chain"] = t.chain;
  std::string why = "packaged: ";
  if (module) {
    const std::string path = c->value("module", "");
    entry["module"] = {{"class", path.substr(path.rfind('/') + 1)}, {"path", path}, {"code", code}};
    why += "its kernel replaces " + entry["module"]["class"].get<std::string>() + ".forward under `forge run`; ";
  } else {
    why += "not a module's whole forward, so eager code keeps the chain; ";
  }
  set(true, why + compiled);
  return entry;
}

}  // namespace

void swap_in(const fs::path& staged, const fs::path& dir) {
  const fs::path old = dir.string() + ".old-" + std::to_string(::getpid());
  std::error_code ec;
  if (fs::exists(dir)) fs::rename(dir, old);
  fs::rename(staged, dir);
  fs::remove_all(old, ec);
}

fs::path package_dir(const Manifest& manifest) { return manifest.store / "package"; }

json package_vary_max(const json& verify, const json& vary, std::string* problem) {
  if (problem) problem->clear();
  if (!vary.is_array() || vary.empty()) return nullptr;  // nothing varies: nothing to bound
  if (!verify.is_object() || !verify.contains("vary_max")) {
    if (problem) *problem = "its evaluation record has no verify.vary_max (verified before the worker reported it)";
    return nullptr;
  }
  const std::string why = family::vary_max_problem(verify["vary_max"], vary.size());
  if (!why.empty()) {
    if (problem) *problem = "its evaluation record's verify." + why;
    return nullptr;
  }
  return verify["vary_max"];
}

Assembly assemble_package(BuildContext& ctx, const std::set<std::string>& left_out, const fs::path& staged) {
  Assembly out;
  const fs::path dir = package_dir(ctx.manifest);
  std::error_code ec;
  fs::remove_all(staged, ec);
  fs::create_directories(staged / "kernels");

  const auto families = load_families(default_targets_dir());
  json entries = json::array();
  for (const auto& t : ctx.targets) {
    if (t.kernels.empty() || left_out.count(t.model)) continue;
    json e = package_entry(ctx, t, families, staged / "kernels");
    if (e.is_null()) continue;
    entries.push_back(std::move(e));
    out.forged_by_model[t.model].push_back(&t);
  }
  for (const auto& t : ctx.chain_targets) {
    if (t.kernels.empty() || left_out.count(t.model)) continue;
    json e = chain_package_entry(ctx, t, families, staged / "kernels");
    if (e.is_null()) continue;
    entries.push_back(std::move(e));
    out.forged_by_model[t.model].push_back(&t);
  }
  if (entries.empty()) return out;
  out.empty = false;
  out.rt = ensure_runtime(ctx, /*with_worker=*/true);
  const auto& rt = out.rt;
  if (!rt || rt->package_lib.empty()) {
    ctx.failed = out.failed = true;
    ctx.notes.push_back("package: libforge.so is not built (see the worker's build above)");
    return out;
  }
  const json pkg = {{"version", 1},
                    {"backend", ctx.device.backend},
                    {"torch", ctx.toolchain.torch_version},
                    {"entries", entries}};
  // For programs that load the library themselves (docs/PACKAGE.md): compiled
  // graphs' routing and the module forwards, as forge_compile.py and forge_modules.py.
  const fs::path autoload = fs::path(FORGE_SOURCE_DIR) / "runtime" / "autoload" / "forge_autoload";
  const std::vector<std::pair<std::string, std::string>> python = {{"compile.py", "forge_compile.py"},
                                                                   {"modules.py", "forge_modules.py"}};
  json unrouted = pkg;
  for (json& e : unrouted["entries"]) {
    e.erase("under_compile");
    if (e.contains("traced_as") && e["traced_as"].is_array())
      for (json& s : e["traced_as"])
        if (s.is_object()) s.erase("under_compile");
  }
  std::vector<std::string> python_text(python.size());
  for (size_t i = 0; i < python.size(); ++i) read_file(autoload / python[i].first, &python_text[i]);
  auto digest_of = [&](const json& p) {
    Hasher h;
    h.add("package", p.dump()).add("lib", rt->worker_digest);
    for (size_t i = 0; i < python.size(); ++i) h.add(python[i].second, python_text[i]);
    return h.hex();
  };
  out.digest = digest_of(pkg);
  out.eager_digest = digest_of(unrouted);
  // An unchanged package is left in place (a running `forge run` keeps its
  // files); any other is checked where it is staged, and swapped in once,
  // after the last round (PackageRule::apply).
  std::string current;
  if (read_file(dir / "digest", &current) && current == out.digest) {
    out.lib = dir / "libforge.so";
  } else {
    fs::copy_file(rt->package_lib, staged / "libforge.so", fs::copy_options::overwrite_existing);
    for (const auto& [from, to] : python)
      fs::copy_file(autoload / from, staged / to, fs::copy_options::overwrite_existing);
    write_file_atomic(staged / "package.json", pkg.dump(2) + "\n");
    write_file_atomic(staged / "digest", out.digest);
    out.lib = staged / "libforge.so";
  }
  ctx.package = {{"status", "ok"}, {"library", (dir / "libforge.so").string()}, {"entries", entries.size()},
                 {"digest", out.digest}, {"models", json::object()}};
  return out;
}

}  // namespace forge
