// Interrupted writes: an AtomicFile dropped before commit, and a temp file left
// by a killed writer, never show up as entries; recover() sweeps the leftovers.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "store/local_store.h"
#include "store/temp_sweep.h"
#include "tests/store/store_test_util.h"
#include "tests/support.h"
#include "util/atomic_file.h"

namespace fs = std::filesystem;
using forge::store::LocalStore;
using forge::test::TempDir;
using forge::test::Warnings;
using forge::test::write_text;

namespace {

// A pid that certainly belonged to a process that has exited.
pid_t dead_pid() {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

fs::path temp_of(const fs::path& target, pid_t pid) {
  fs::path temp = target;
  temp += ".tmp." + std::to_string(pid) + ".0";
  return temp;
}

void make_old(const fs::path& path) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::hours(2));
}

}  // namespace

TEST_SUITE_BEGIN("store::LocalStore");

TEST_CASE("a write dropped before commit leaves no entry and no file") {
  TempDir dir;
  Warnings warnings;
  LocalStore store(dir / ".forge", warnings.fn());
  const std::string payload = "half of this is written";
  const std::string digest = forge::sha256_hex(payload);
  fs::path temp;
  {
    forge::AtomicFile file(store.object_path(digest));
    file.write(payload.substr(0, payload.size() / 2));
    temp = file.temp_path();
    CHECK(fs::exists(temp));
    CHECK_FALSE(store.get_object(digest));
  }
  CHECK_FALSE(fs::exists(temp));
  CHECK_FALSE(store.get_object(digest));
  CHECK_FALSE(store.has_object(digest));
  CHECK(warnings.seen().empty());
}

TEST_CASE("a temp file of a killed writer is never an entry and is swept on open") {
  TempDir dir;
  const fs::path root = dir / ".forge";
  const std::string payload = "payload";
  const std::string digest = forge::sha256_hex(payload);
  const std::string key = forge::sha256_hex("key");
  fs::path object, action, ref, version;
  {
    LocalStore store(root, nullptr);
    object = store.object_path(digest);
    action = store.action_path(key);
    ref = store.ref_path("explain/deep/step");
    version = root / "VERSION";
  }
  const pid_t dead = dead_pid();
  const std::string half =
      forge::store::encode_entry(forge::store::EntryKind::kObject, payload).substr(0, 15);
  for (const fs::path& target : {object, action, ref, version})
    write_text(temp_of(target, dead), half);
  // Fresh temps of a live writer (this process) stay; old ones go.
  const fs::path live = temp_of(object, ::getpid());
  const fs::path live_old = temp_of(action, ::getpid());
  write_text(live, half);
  write_text(live_old, half);
  make_old(live_old);

  Warnings warnings;
  LocalStore store(root, warnings.fn());
  for (const fs::path& target : {object, action, ref, version}) {
    CAPTURE(target);
    CHECK_FALSE(fs::exists(temp_of(target, dead)));
  }
  CHECK(fs::exists(live));
  CHECK_FALSE(fs::exists(live_old));
  CHECK_FALSE(store.get_object(digest));
  CHECK_FALSE(store.get_action(key));
  CHECK_FALSE(store.get_ref("explain/deep/step"));
  CHECK(warnings.seen().empty());

  CHECK(store.put_object(payload) == digest);
  CHECK(store.get_object(digest) == payload);
  CHECK(fs::exists(live));  // putting the entry does not touch a live writer's temp
  make_old(live);
  CHECK(store.recover() == 1);
  CHECK_FALSE(fs::exists(live));
}

TEST_CASE("the sweep leaves everything that is not a temp file alone") {
  TempDir dir;
  const fs::path root = dir / ".forge";
  LocalStore store(root, nullptr);
  const std::string digest = store.put_object("x");
  store.put_ref("a.b/c-d", "y");
  write_text(root / "lock", "123\n");
  write_text(root / "unrelated" / ("other.tmp." + std::to_string(dead_pid()) + ".0"), "z");
  CHECK(store.recover() == 0);
  CHECK(store.get_object(digest) == "x");
  CHECK(store.get_ref("a.b/c-d") == "y");
  CHECK(fs::exists(root / "lock"));
  CHECK(fs::exists(root / "VERSION"));
  CHECK(forge::store::is_temp_name("abc.tmp.1.2"));
  CHECK_FALSE(forge::store::is_temp_name("abc"));
}

TEST_SUITE_END();
