// forge.yaml's `slurm:` and `cache:` sections (docs/CLUSTER.md).
#include <doctest/doctest.h>

#include "engine/manifest.h"
#include "util/error.h"

namespace forge {

TEST_SUITE_BEGIN("engine::ManifestCluster");

TEST_CASE("slurm and cache sections parse; defaults otherwise") {
  Manifest d = parse_manifest("models: {m: {run: x}}\n", "/p/forge.yaml");
  CHECK(d.executor == "local");
  CHECK(d.slurm.max_parallel == 4);
  CHECK(d.slurm.retries == 2);
  CHECK(d.cache.url.empty());
  CHECK(d.cache.timeout_seconds == 5);

  Manifest m = parse_manifest(
      "models: {m: {run: x}}\nexecutor: slurm\n"
      "slurm: {partition: gpu, account: a1, time_limit: 30, gres: 'gpu:1', max_parallel: 2,"
      " retries: 3, poll_seconds: 0.5}\n"
      "cache: {url: 'http://127.0.0.1:8080/forge/', timeout_seconds: 2}\n",
      "/p/forge.yaml");
  CHECK(m.executor == "slurm");
  CHECK(m.slurm.partition == "gpu");
  CHECK(m.slurm.account == "a1");
  CHECK(m.slurm.time_limit == "30");
  CHECK(m.slurm.gres == "gpu:1");
  CHECK(m.slurm.max_parallel == 2);
  CHECK(m.slurm.retries == 3);
  CHECK(m.slurm.poll_seconds == 0.5);
  CHECK(m.cache.url == "http://127.0.0.1:8080/forge");
  CHECK(m.cache.timeout_seconds == 2);
}

TEST_CASE("cluster settings are checked") {
  CHECK_THROWS_WITH_AS(parse_manifest("models: {m: {run: x}}\ncache: {url: ftp://x}\n", "f.yaml"),
                       "f.yaml:2:14: 'url' must start with http:// or https://, got 'ftp://x'\n"
                       "cache: {url: ftp://x}\n"
                       "             ^",
                       ManifestError);
  CHECK_THROWS_AS(parse_manifest("models: {m: {run: x}}\nslurm: {partitoin: gpu}\n", "f.yaml"),
                  ManifestError);
  CHECK_THROWS_AS(parse_manifest("models: {m: {run: x}}\nslurm: {retries: -1}\n", "f.yaml"),
                  ManifestError);
}

TEST_SUITE_END();

}  // namespace forge
