#include "store/local_store.h"

#include <iostream>
#include <system_error>

#include "store/names.h"
#include "store/raw_read.h"
#include "store/temp_sweep.h"
#include "util/atomic_file.h"
#include "util/hash.h"

namespace forge::store {
namespace fs = std::filesystem;
namespace {

// Past this many write failures in one store, further ones are counted, not reported.
constexpr int kMaxWriteWarnings = 5;

const char* noun_of(EntryKind kind) {
  switch (kind) {
    case EntryKind::kObject:
      return "object";
    case EntryKind::kAction:
      return "action record";
    case EntryKind::kRef:
      return "ref";
  }
  return "entry";
}

std::string version_text() {
  return "forge store format " + std::to_string(kFormatVersion) + "\n";
}

fs::path fan_out(const fs::path& dir, const std::string& hex) {
  return dir / hex.substr(0, 2) / hex.substr(2);
}

}  // namespace

LocalStore::LocalStore(fs::path root, WarnFn warn)
    : m_root(std::move(root)), m_warn(std::move(warn)) {
  if (!m_warn)
    m_warn = [](const std::string& msg) { std::cerr << "forge: warning: " << msg << "\n"; };
  for (const char* sub : {"objects", "actions", "refs"}) {
    std::error_code ec;
    fs::create_directories(m_root / sub, ec);
    if (ec) write_failed("cannot create " + (m_root / sub).string() + ": " + ec.message());
  }
  check_version_file();
  recover();
}

void LocalStore::check_version_file() {
  const fs::path path = m_root / "VERSION";
  RawRead r = read_raw(path, 256);
  if (r.status == RawRead::kOk && r.bytes == version_text()) return;
  if (r.status == RawRead::kOk)
    m_warn("store: " + path.string() + " says '" + r.bytes.substr(0, r.bytes.find('\n')) +
           "', this forge writes format " + std::to_string(kFormatVersion) +
           "; entries it cannot read will be recomputed");
  else if (r.status == RawRead::kError)
    m_warn("store: cannot read " + path.string() + ": " + r.error);
  try {
    write_file_atomic(path, version_text());
  } catch (const std::exception& e) {
    write_failed(e.what());
  }
}

int LocalStore::recover() {
  return sweep_stale_temps(m_root, m_warn);
}

fs::path LocalStore::object_path(const std::string& digest) const {
  check_sha256_hex(digest, "object digest");
  return fan_out(m_root / "objects", digest);
}

fs::path LocalStore::action_path(const std::string& key) const {
  check_sha256_hex(key, "action key");
  return fan_out(m_root / "actions", key);
}

fs::path LocalStore::ref_path(const std::string& name) const {
  check_ref_name(name);
  return m_root / "refs" / name;
}

std::string LocalStore::put_object(std::string_view bytes) {
  std::string digest = sha256_hex(bytes);
  fs::path path = object_path(digest);
  // Skip the write when the exact file is already there (the common case: an
  // unchanged source). Anything else, corrupt included, is simply replaced.
  RawRead r = read_raw(path, kHeaderSize);
  if (r.status == RawRead::kOk &&
      static_cast<uint64_t>(r.st.st_size) == entry_size(EntryKind::kObject, bytes.size()) &&
      r.bytes == entry_header(EntryKind::kObject, bytes.size())) {
    RawRead whole = read_raw(path);
    if (whole.status == RawRead::kOk && whole.bytes.size() == kHeaderSize + bytes.size() &&
        std::string_view(whole.bytes).substr(kHeaderSize) == bytes)
      return digest;
  }
  write_entry(EntryKind::kObject, path, bytes);
  return digest;
}

std::optional<std::string> LocalStore::get_object(const std::string& digest) {
  return read_entry(EntryKind::kObject, object_path(digest), digest);
}

bool LocalStore::has_object(const std::string& digest) {
  fs::path path = object_path(digest);
  RawRead r = read_raw(path, kHeaderSize);
  if (r.status == RawRead::kMissing) return false;
  if (r.status == RawRead::kError) {
    m_warn("store: cannot read object " + path.string() + ": " + r.error);
    return false;
  }
  std::string why;
  if (check_header(EntryKind::kObject, r.bytes, static_cast<uint64_t>(r.st.st_size), &why))
    return true;
  discard(path, r.st, "corrupt object " + path.string() + ": " + why);
  return false;
}

void LocalStore::put_action(const std::string& key, std::string_view record) {
  write_entry(EntryKind::kAction, action_path(key), record);
}

std::optional<std::string> LocalStore::get_action(const std::string& key) {
  return read_entry(EntryKind::kAction, action_path(key), "");
}

void LocalStore::put_ref(const std::string& name, std::string_view value) {
  write_entry(EntryKind::kRef, ref_path(name), value);
}

std::optional<std::string> LocalStore::get_ref(const std::string& name) {
  return read_entry(EntryKind::kRef, ref_path(name), "");
}

std::optional<std::string> LocalStore::read_entry(EntryKind kind, const fs::path& path,
                                                  const std::string& digest) {
  RawRead r = read_raw(path);
  if (r.status == RawRead::kMissing) return std::nullopt;
  if (r.status == RawRead::kError) {
    m_warn(std::string("store: cannot read ") + noun_of(kind) + " " + path.string() + ": " +
           r.error);
    return std::nullopt;
  }
  std::string why;
  std::optional<std::string> payload = decode_entry(kind, r.bytes, &why);
  if (payload && !digest.empty() && sha256_hex(*payload) != digest) {
    payload.reset();
    why = "content does not match its digest";
  }
  if (!payload)
    discard(path, r.st, std::string("corrupt ") + noun_of(kind) + " " + path.string() + ": " + why);
  return payload;
}

void LocalStore::write_entry(EntryKind kind, const fs::path& path, std::string_view payload) {
  try {
    AtomicFile file(path);
    file.write(entry_header(kind, payload.size()));
    file.write(payload);
    file.write(entry_trailer(kind, payload));
    file.commit();
  } catch (const std::exception& e) {
    write_failed(std::string("cannot store ") + noun_of(kind) + " " + path.string() + ": " +
                 e.what());
  }
}

void LocalStore::discard(const fs::path& path, const struct stat& seen, const std::string& why) {
  std::string outcome = "removed it, it will be recomputed";
  std::error_code ec;
  if (!same_file(path, seen))
    outcome = "already replaced";
  else if (!fs::remove(path, ec) && ec)
    outcome = "could not remove it: " + ec.message();
  m_warn("store: ignoring " + why + " (" + outcome + ")");
}

void LocalStore::write_failed(const std::string& message) {
  int n = ++m_write_failures;
  if (n <= kMaxWriteWarnings) m_warn("store: " + message + "; continuing without caching it");
  if (n == kMaxWriteWarnings)
    m_warn("store: further write failures in " + m_root.string() + " are not reported");
}

std::unique_ptr<Store> open_local_store(const fs::path& root, WarnFn warn) {
  return std::make_unique<LocalStore>(root, std::move(warn));
}

}  // namespace forge::store
