#include "cli/session.h"

#include <cstdlib>

#include "store/http_cache.h"
#include "util/error.h"

namespace forge::cli {

std::unique_ptr<Session> open_session(const Invocation& inv, Access access,
                                      BuildOptions options) {
  auto s = std::make_unique<Session>();
  std::filesystem::path path = inv.dir / "forge.yaml";
  s->manifest = load_manifest(path);
  s->progress = std::make_unique<Progress>(Progress::stderr_is_terminal(),
                                           Progress::lines_requested());
  Progress* progress = s->progress.get();
  s->store = store::open_local_store(s->manifest.store,
                                     [progress](const std::string& m) { progress->warn(m); });
  // A shared cache in front of it: FORGE_CACHE_URL, else forge.yaml's cache.url.
  const char* env_url = std::getenv("FORGE_CACHE_URL");
  store::HttpCacheOptions cache{env_url ? env_url : s->manifest.cache.url,
                                s->manifest.cache.timeout_seconds};
  if (!cache.url.empty())
    s->store = store::make_http_cached_store(
        std::move(s->store), cache, [progress](const std::string& m) { progress->warn(m); });
  if (access == Access::Write)
    s->lock.emplace(s->manifest.store,
                    [progress](const std::string& m) { progress->warn(m); });
  s->runner = make_process_runner();
  s->builder = std::make_unique<Builder>(*s->store, *s->progress);
  Toolchain tc = probe_toolchain(*s->runner);
  DeviceInfo dev = probe_device(*s->runner, s->manifest.device, tc);
  s->ctx.reset(new BuildContext{s->manifest, *s->builder, *s->runner, tc, dev, options});
  return s;
}

}  // namespace forge::cli
