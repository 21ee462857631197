// The store: every artifact forge produces, addressed by content.
//
// Two maps, both rebuildable caches (git holds what must survive):
//  - objects:  sha256(bytes) -> bytes          (sources, captured inputs, logs, reports)
//  - actions:  step key      -> result record  (what running a step produced; a JSON
//              text that names its output objects by digest)
// A step key is a Hasher digest over everything the step depends on (its inputs,
// the toolchain, the GPU), so an unchanged input finds its record and nothing reruns.
//
// Contract for every implementation: a failure to read or write is a miss plus a
// warning (through the warn callback), never a crash and never a wrong answer; a
// corrupt or truncated entry is a miss. Keys and digests are 64 lower-case hex chars.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace forge::store {

using WarnFn = std::function<void(const std::string&)>;

class Store {
 public:
  virtual ~Store() = default;

  // Stores bytes; returns their sha256 digest (also when the write failed: the
  // caller keeps working and the next build recomputes).
  virtual std::string put_object(std::string_view bytes) = 0;
  virtual std::optional<std::string> get_object(const std::string& digest) = 0;
  virtual bool has_object(const std::string& digest) = 0;

  virtual void put_action(const std::string& key, std::string_view record) = 0;
  virtual std::optional<std::string> get_action(const std::string& key) = 0;

  // Named, mutable pointers (e.g. "explain/<step>" = last inputs of a step,
  // "journal/<target>"); small, atomically replaced, not content-addressed.
  virtual void put_ref(const std::string& name, std::string_view value) = 0;
  virtual std::optional<std::string> get_ref(const std::string& name) = 0;
};

// A folder on disk (default `.forge/` beside forge.yaml). Layout and format are
// documented in store/local_store.h.
std::unique_ptr<Store> open_local_store(const std::filesystem::path& root, WarnFn warn);

// In memory, for tests of code above the store.
std::unique_ptr<Store> make_memory_store();

}  // namespace forge::store
