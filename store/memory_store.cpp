// make_memory_store(): the Store as three maps under one mutex. Nothing here
// can fail, so it never warns; it checks arguments exactly like LocalStore.
#include <map>
#include <mutex>

#include "store/names.h"
#include "store/store.h"
#include "util/hash.h"

namespace forge::store {
namespace {

using Map = std::map<std::string, std::string, std::less<>>;

class MemoryStore final : public Store {
 public:
  std::string put_object(std::string_view bytes) override {
    std::string digest = sha256_hex(bytes);
    std::lock_guard lock(m_mutex);
    m_objects.try_emplace(digest, bytes);
    return digest;
  }
  std::optional<std::string> get_object(const std::string& digest) override {
    check_sha256_hex(digest, "object digest");
    return find(m_objects, digest);
  }
  bool has_object(const std::string& digest) override {
    check_sha256_hex(digest, "object digest");
    std::lock_guard lock(m_mutex);
    return m_objects.count(digest) > 0;
  }

  void put_action(const std::string& key, std::string_view record) override {
    check_sha256_hex(key, "action key");
    std::lock_guard lock(m_mutex);
    m_actions.insert_or_assign(key, std::string(record));
  }
  std::optional<std::string> get_action(const std::string& key) override {
    check_sha256_hex(key, "action key");
    return find(m_actions, key);
  }

  void put_ref(const std::string& name, std::string_view value) override {
    check_ref_name(name);
    std::lock_guard lock(m_mutex);
    m_refs.insert_or_assign(name, std::string(value));
  }
  std::optional<std::string> get_ref(const std::string& name) override {
    check_ref_name(name);
    return find(m_refs, name);
  }

 private:
  std::optional<std::string> find(const Map& map, const std::string& key) {
    std::lock_guard lock(m_mutex);
    auto it = map.find(key);
    if (it == map.end()) return std::nullopt;
    return it->second;
  }

  std::mutex m_mutex;
  Map m_objects, m_actions, m_refs;
};

}  // namespace

std::unique_ptr<Store> make_memory_store() {
  return std::make_unique<MemoryStore>();
}

}  // namespace forge::store
