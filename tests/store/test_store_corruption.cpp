// Every way a store file can be damaged (cut short at any byte, any byte
// flipped, bytes appended, wrong magic or version) reads back as a miss with a
// warning naming the file, never as wrong data; the bad file is removed and the
// next put makes the entry readable again.
#include <functional>

#include "store/local_store.h"
#include "tests/store/store_test_util.h"
#include "tests/support.h"

namespace fs = std::filesystem;
using forge::store::LocalStore;
using forge::test::read_text;
using forge::test::TempDir;
using forge::test::Warnings;
using forge::test::write_text;

namespace {

struct Entry {
  const char* name;
  std::function<void(LocalStore&)> put;
  std::function<std::optional<std::string>(LocalStore&)> get;
  std::function<fs::path(LocalStore&)> path;
  std::string payload;
};

std::vector<Entry> entries() {
  const std::string object = "int main() { return 0; }\n";
  const std::string digest = forge::sha256_hex(object);
  const std::string key = forge::sha256_hex("step");
  const std::string record = R"({"exit":0})";
  return {
      {"object", [=](LocalStore& s) { s.put_object(object); },
       [=](LocalStore& s) { return s.get_object(digest); },
       [=](LocalStore& s) { return s.object_path(digest); }, object},
      {"action", [=](LocalStore& s) { s.put_action(key, record); },
       [=](LocalStore& s) { return s.get_action(key); },
       [=](LocalStore& s) { return s.action_path(key); }, record},
      {"ref", [](LocalStore& s) { s.put_ref("explain/step", "abc"); },
       [](LocalStore& s) { return s.get_ref("explain/step"); },
       [](LocalStore& s) { return s.ref_path("explain/step"); }, "abc"},
  };
}

// Replaces the entry's file with `damaged`, then checks: a miss, a warning that
// names the file, the file gone, and a put + get that works again.
void check_damage_is_a_miss(LocalStore& store, Warnings& warnings, const Entry& entry,
                            const std::string& damaged) {
  const fs::path path = entry.path(store);
  write_text(path, damaged);
  warnings.clear();
  CHECK_FALSE(entry.get(store));
  CHECK(warnings.any_contains({path.string()}));
  CHECK_FALSE(fs::exists(path));
  entry.put(store);
  CHECK(entry.get(store) == entry.payload);
}

}  // namespace

TEST_SUITE_BEGIN("store::LocalStore");

TEST_CASE("a file truncated at every byte offset is a miss, and the store recovers") {
  TempDir dir;
  Warnings warnings;
  LocalStore store(dir / ".forge", warnings.fn());
  for (const Entry& entry : entries()) {
    CAPTURE(entry.name);
    entry.put(store);
    const std::string full = read_text(entry.path(store));
    REQUIRE(full.size() > 20);
    for (size_t cut = 0; cut < full.size(); ++cut) {
      CAPTURE(cut);
      check_damage_is_a_miss(store, warnings, entry, full.substr(0, cut));
    }
  }
}

TEST_CASE("a truncated object is not reported present") {
  TempDir dir;
  Warnings warnings;
  LocalStore store(dir / ".forge", warnings.fn());
  const std::string digest = store.put_object("0123456789");
  const std::string full = read_text(store.object_path(digest));
  for (size_t cut = 0; cut < full.size(); ++cut) {
    CAPTURE(cut);
    write_text(store.object_path(digest), full.substr(0, cut));
    CHECK_FALSE(store.has_object(digest));
    store.put_object("0123456789");
    CHECK(store.has_object(digest));
  }
}

TEST_CASE("a flipped byte anywhere in a file is a miss") {
  TempDir dir;
  Warnings warnings;
  LocalStore store(dir / ".forge", warnings.fn());
  for (const Entry& entry : entries()) {
    CAPTURE(entry.name);
    entry.put(store);
    const std::string full = read_text(entry.path(store));
    for (size_t at = 0; at < full.size(); ++at) {
      CAPTURE(at);
      std::string damaged = full;
      damaged[at] = static_cast<char>(damaged[at] ^ 0x01);
      check_damage_is_a_miss(store, warnings, entry, damaged);
    }
  }
}

TEST_CASE("appended bytes are a miss") {
  TempDir dir;
  Warnings warnings;
  LocalStore store(dir / ".forge", warnings.fn());
  for (const Entry& entry : entries()) {
    CAPTURE(entry.name);
    entry.put(store);
    const std::string full = read_text(entry.path(store));
    check_damage_is_a_miss(store, warnings, entry, full + "x");
    CHECK(warnings.any_contains({"length mismatch"}));
  }
}

TEST_CASE("wrong magic or an unknown version is a miss with a warning") {
  TempDir dir;
  Warnings warnings;
  LocalStore store(dir / ".forge", warnings.fn());
  for (const Entry& entry : entries()) {
    CAPTURE(entry.name);
    entry.put(store);
    const std::string full = read_text(entry.path(store));

    std::string magic = full;
    magic.replace(0, 8, "NOTFORGE");
    check_damage_is_a_miss(store, warnings, entry, magic);
    CHECK(warnings.any_contains({"wrong magic", entry.path(store).string()}));

    std::string version = full;
    version[8] = 2;  // a future format
    check_damage_is_a_miss(store, warnings, entry, version);
    CHECK(warnings.any_contains({"unknown format version 2"}));
  }
  // An action file where an object belongs has the wrong magic too.
  const std::string digest = store.put_object("x");
  const fs::path object = store.object_path(digest);
  store.put_action(digest, "x");
  fs::copy_file(store.action_path(digest), object, fs::copy_options::overwrite_existing);
  warnings.clear();
  CHECK_FALSE(store.get_object(digest));
  CHECK(warnings.any_contains({"wrong magic"}));
}

TEST_CASE("a well-formed object under the wrong name is a miss") {
  TempDir dir;
  Warnings warnings;
  LocalStore store(dir / ".forge", warnings.fn());
  const std::string a = store.put_object("a");
  const std::string b = store.put_object("b");
  fs::copy_file(store.object_path(a), store.object_path(b), fs::copy_options::overwrite_existing);
  CHECK_FALSE(store.get_object(b));
  CHECK(warnings.any_contains({"does not match its digest", store.object_path(b).string()}));
  CHECK(store.get_object(a) == "a");
}

TEST_CASE("a folder where a file belongs is a warning and a miss, not a crash") {
  TempDir dir;
  Warnings warnings;
  LocalStore store(dir / ".forge", warnings.fn());
  const std::string key = forge::sha256_hex("k");
  fs::create_directories(store.action_path(key));
  CHECK_FALSE(store.get_action(key));
  CHECK(warnings.any_contains({"cannot read", store.action_path(key).string()}));
  CHECK_NOTHROW(store.put_action(key, "r"));
  CHECK_FALSE(store.get_action(key));
}

TEST_SUITE_END();
