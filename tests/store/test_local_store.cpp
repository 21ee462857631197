#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "store/local_store.h"
#include "tests/store/store_test_util.h"
#include "tests/support.h"

namespace fs = std::filesystem;
using forge::store::LocalStore;
using forge::test::read_text;
using forge::test::TempDir;
using forge::test::Warnings;

TEST_SUITE_BEGIN("store::LocalStore");

TEST_CASE("the local store keeps the Store contract, without warnings") {
  TempDir dir;
  Warnings warnings;
  auto store = forge::store::open_local_store(dir / ".forge", warnings.fn());
  forge::test::check_store_contract(*store);
  CHECK(warnings.seen().empty());
}

TEST_CASE("entries survive reopening the store") {
  TempDir dir;
  Warnings warnings;
  std::string digest, key = forge::sha256_hex("k");
  {
    LocalStore store(dir / ".forge", warnings.fn());
    digest = store.put_object("kept");
    store.put_action(key, "record");
    store.put_ref("a/b/c", "ref");
  }
  LocalStore store(dir / ".forge", warnings.fn());
  CHECK(store.get_object(digest) == "kept");
  CHECK(store.get_action(key) == "record");
  CHECK(store.get_ref("a/b/c") == "ref");
  CHECK(warnings.seen().empty());
}

TEST_CASE("layout: VERSION, fan-out folders, refs as paths; sha256('abc') is pinned") {
  TempDir dir;
  LocalStore store(dir / ".forge", nullptr);
  const std::string abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  CHECK(store.put_object("abc") == abc);
  const fs::path object =
      dir / ".forge/objects/ba/7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  CHECK(store.object_path(abc) == object);
  REQUIRE(fs::exists(object));
  const std::string bytes = read_text(object);
  CHECK(bytes == std::string("FORGEOB1\x01\0\0\0\x03\0\0\0\0\0\0\0abc", 23));
  CHECK(read_text(dir / ".forge/VERSION") == "forge store format 1\n");

  const std::string key = forge::sha256_hex("key");
  store.put_action(key, "r");
  const std::string action = read_text(dir / ".forge/actions" / key.substr(0, 2) / key.substr(2));
  CHECK(action.substr(0, 8) == "FORGEAC1");
  CHECK(action.size() == 20 + 1 + 64);
  CHECK(action.substr(21) == forge::sha256_hex("r"));

  store.put_ref("explain/step", "v");
  CHECK(read_text(dir / ".forge/refs/explain/step").substr(0, 8) == "FORGERF1");
}

TEST_CASE("a VERSION from another format is reported and rewritten") {
  TempDir dir;
  forge::test::write_text(dir / ".forge/VERSION", "forge store format 99\n");
  Warnings warnings;
  LocalStore store(dir / ".forge", warnings.fn());
  CHECK(warnings.any_contains({"VERSION", "format 99"}));
  CHECK(read_text(dir / ".forge/VERSION") == "forge store format 1\n");
}

TEST_CASE("putting an existing valid object does not rewrite it") {
  TempDir dir;
  LocalStore store(dir / ".forge", nullptr);
  std::string digest = store.put_object("same");
  struct stat before {};
  REQUIRE(::stat(store.object_path(digest).c_str(), &before) == 0);
  store.put_object("same");
  struct stat after {};
  REQUIRE(::stat(store.object_path(digest).c_str(), &after) == 0);
  CHECK(before.st_ino == after.st_ino);  // a rewrite renames a new inode in
}

TEST_CASE("an unwritable store warns on put, misses on get, and never throws") {
  TempDir dir;
  const fs::path root = dir / ".forge";
  fs::create_directories(root);
  const bool as_root = ::geteuid() == 0;
  if (as_root)  // root ignores permissions: make the objects folder a file instead
    forge::test::write_text(root / "objects", "not a folder");
  else
    fs::permissions(root, fs::perms::owner_read | fs::perms::owner_exec);

  Warnings warnings;
  LocalStore store(root, warnings.fn());
  warnings.clear();
  std::string digest;
  CHECK_NOTHROW(digest = store.put_object("lost"));
  CHECK(digest == forge::sha256_hex("lost"));
  CHECK(warnings.any_contains({"cannot store object", digest.substr(2)}));
  CHECK_FALSE(store.get_object(digest));
  CHECK_FALSE(store.has_object(digest));
  if (!as_root) {
    const std::string key = forge::sha256_hex("k");
    CHECK_NOTHROW(store.put_action(key, "r"));
    CHECK_NOTHROW(store.put_ref("r", "v"));
    CHECK_FALSE(store.get_action(key));
    CHECK_FALSE(store.get_ref("r"));
  }
  // A failing store does not flood the log: a few warnings, then one summary.
  for (int i = 0; i < 20; ++i) store.put_object("lost " + std::to_string(i));
  CHECK(warnings.count() <= 6);
  CHECK(warnings.any_contains({"not reported"}));
  fs::permissions(root, fs::perms::owner_all);
}

TEST_CASE("concurrent writers of one object and one action never corrupt them") {
  TempDir dir;
  Warnings warnings;
  const std::string big(256 * 1024, 'x');
  const std::string digest = forge::sha256_hex(big);
  const std::string key = forge::sha256_hex("shared step");
  const std::string record_a(100000, 'a'), record_b(50000, 'b');
  std::atomic<bool> wrong{false};

  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      LocalStore store(dir / ".forge", warnings.fn());  // one instance per writer
      for (int i = 0; i < 25; ++i) {
        store.put_object(big);
        store.put_action(key, t % 2 ? record_a : record_b);
        auto object = store.get_object(digest);
        auto record = store.get_action(key);
        if (object && *object != big) wrong = true;
        if (record && *record != record_a && *record != record_b) wrong = true;
      }
    });
  for (auto& t : threads) t.join();
  CHECK_FALSE(wrong);
  CHECK(warnings.seen().empty());
  LocalStore store(dir / ".forge", warnings.fn());
  CHECK(store.get_object(digest) == big);
}

TEST_CASE("two processes writing the same entries leave a valid store") {
  TempDir dir;
  const fs::path root = dir / ".forge";
  const std::string payload(64 * 1024, 'p');
  const std::string key = forge::sha256_hex("step");
  auto hammer = [&](const std::string& record) {
    bool ok = true;
    LocalStore store(root, [&ok](const std::string&) { ok = false; });
    for (int i = 0; i < 50; ++i) {
      store.put_object(payload);
      store.put_action(key, record);
      auto got = store.get_action(key);
      if (got && *got != "child" && *got != "parent") ok = false;
    }
    return ok;
  };
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(hammer("child") ? 0 : 1);
  Warnings warnings;
  bool parent_ok = hammer("parent");
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(parent_ok);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  LocalStore store(root, warnings.fn());
  CHECK(store.get_object(forge::sha256_hex(payload)) == payload);
  auto record = store.get_action(key);
  CHECK((record == "child" || record == "parent"));
  CHECK(warnings.seen().empty());
}

TEST_SUITE_END();
