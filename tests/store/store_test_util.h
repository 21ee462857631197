// Helpers for the store tests: a thread-safe warning collector, and the
// behaviour every Store implementation must show (run against each one).
#pragma once

#include <doctest/doctest.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "store/store.h"
#include "util/hash.h"

namespace forge::test {

class Warnings {
 public:
  store::WarnFn fn() {
    return [this](const std::string& msg) {
      std::lock_guard lock(m_mutex);
      m_seen.push_back(msg);
    };
  }
  std::vector<std::string> seen() {
    std::lock_guard lock(m_mutex);
    return m_seen;
  }
  size_t count() { return seen().size(); }
  void clear() {
    std::lock_guard lock(m_mutex);
    m_seen.clear();
  }
  // True when some warning contains every one of `parts`.
  bool any_contains(std::initializer_list<std::string> parts) {
    for (const std::string& msg : seen()) {
      bool all = true;
      for (const std::string& part : parts) all = all && msg.find(part) != std::string::npos;
      if (all) return true;
    }
    return false;
  }

 private:
  std::mutex m_mutex;
  std::vector<std::string> m_seen;
};

// The Store contract, independent of where the bytes live.
inline void check_store_contract(store::Store& s) {
  const std::string abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  const std::string key = sha256_hex("step key");

  // Missing entries are misses.
  CHECK_FALSE(s.get_object(abc));
  CHECK_FALSE(s.has_object(abc));
  CHECK_FALSE(s.get_action(key));
  CHECK_FALSE(s.get_ref("explain/step"));

  // Round trips, including empty and binary payloads.
  CHECK(s.put_object("abc") == abc);
  CHECK(s.get_object(abc) == "abc");
  CHECK(s.has_object(abc));
  CHECK(s.put_object("abc") == abc);  // idempotent
  const std::string binary("\0\xff\n\r\0FORGEOB1", 14);
  CHECK(s.get_object(s.put_object(binary)) == binary);
  CHECK(s.get_object(s.put_object("")) == "");

  s.put_action(key, R"({"outputs":{"a.o":"ab"}})");
  CHECK(s.get_action(key) == R"({"outputs":{"a.o":"ab"}})");
  s.put_action(key, "second");  // replaced, not appended
  CHECK(s.get_action(key) == "second");

  s.put_ref("explain/step", "v1");
  s.put_ref("journal/x.y_z-1", "");
  CHECK(s.get_ref("explain/step") == "v1");
  CHECK(s.get_ref("journal/x.y_z-1") == "");
  s.put_ref("explain/step", "v2");
  CHECK(s.get_ref("explain/step") == "v2");

  // Malformed arguments are programming errors.
  CHECK_THROWS_AS(s.get_object("ABC"), std::invalid_argument);
  CHECK_THROWS_AS(s.get_object(std::string(64, 'A')), std::invalid_argument);
  CHECK_THROWS_AS(s.has_object(abc + "0"), std::invalid_argument);
  CHECK_THROWS_AS(s.put_action("key", "x"), std::invalid_argument);
  CHECK_THROWS_AS(s.get_action(""), std::invalid_argument);
  for (const char* bad : {"", "/abs", "..", "a/../b", "a//b", "a/", "./a", "a b", "a:b", "a\\b",
                          "x.tmp.12.0", "\xc3\xbc"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(s.put_ref(bad, "x"), std::invalid_argument);
    CHECK_THROWS_AS(s.get_ref(bad), std::invalid_argument);
  }
  CHECK_THROWS_AS(s.get_ref(std::string(201, 'a')), std::invalid_argument);
}

}  // namespace forge::test
