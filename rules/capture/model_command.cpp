#include "rules/capture/model_command.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

#include "engine/environment.h"
#include "util/hash.h"
#include "util/atomic_file.h"

namespace forge {
namespace fs = std::filesystem;

// Files the command names (e.g. "python infer.py --batch 64" -> infer.py): their
// contents enter the key, so editing the script re-captures.
std::string named_files_digest(const ModelSpec& m) {
  Hasher h;
  std::istringstream words(m.run);
  std::string w;
  while (words >> w) {
    fs::path p = fs::path(w).is_absolute() ? fs::path(w) : m.workdir / w;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec) || fs::file_size(p, ec) > (size_t{64} << 20)) continue;
    std::string bytes;
    if (read_file(p, &bytes)) h.add("file", w).add("content", bytes);
  }
  if (!m.torchscript.empty()) {
    std::string bytes;
    read_file(m.torchscript, &bytes);
    h.add("torchscript", bytes);
    read_file(m.inputs, &bytes);
    h.add("inputs", bytes);
  }
  return h.hex();
}

std::string model_env_digest(const ModelSpec& m, bool threads) {
  Hasher h;
  for (const auto& [k, v] : m.env) h.add(k, v);
  if (!threads) return h.hex();
  bool set = false;
  for (const char* k : {"OMP_NUM_THREADS", "MKL_NUM_THREADS"}) {
    if (m.env.count(k)) {
      set = true;
    } else if (const char* v = std::getenv(k)) {
      h.add(std::string("inherited ") + k, v);
      set = true;
    }
  }
  if (!set) h.add("cores", std::to_string(std::thread::hardware_concurrency()));
  return h.hex();
}

void add_autoload_env(Command& c, const std::vector<std::string>& libs) {
  const char* py = std::getenv("PYTHONPATH");
  c.env["PYTHONPATH"] = (fs::path(FORGE_SOURCE_DIR) / "runtime" / "autoload").string() +
                        (py && *py ? std::string(":") + py : "");
  std::string joined;
  for (const auto& l : libs) joined += (joined.empty() ? "" : ":") + l;
  c.env["FORGE_LOAD_LIBS"] = joined;
}

Command model_command(const ModelSpec& m, const RuntimeLibs& rt, const std::vector<std::string>& libs) {
  Command c;
  if (!m.torchscript.empty())
    c.argv = {rt.torchscript_runner.string(), m.torchscript.string(), m.inputs.string()};
  else
    c.argv = shell_argv(m.run);
  c.cwd = m.workdir;
  c.env = m.env;
  c.env["PATH"] = forge_path_env();
  add_autoload_env(c, libs);
  return c;
}

}  // namespace forge
