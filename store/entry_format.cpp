#include "store/entry_format.h"

#include <cstring>

#include "util/hash.h"

namespace forge::store {
namespace {

constexpr size_t kMagicSize = 8;

void put_le(std::string* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t get_le(std::string_view in, size_t offset, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= uint64_t{static_cast<unsigned char>(in[offset + i])} << (8 * i);
  return value;
}

}  // namespace

const char* magic_of(EntryKind kind) {
  switch (kind) {
    case EntryKind::kObject:
      return "FORGEOB1";
    case EntryKind::kAction:
      return "FORGEAC1";
    case EntryKind::kRef:
      return "FORGERF1";
  }
  return "";
}

bool has_trailer(EntryKind kind) {
  return kind != EntryKind::kObject;
}

uint64_t entry_size(EntryKind kind, uint64_t payload_size) {
  return kHeaderSize + payload_size + (has_trailer(kind) ? kTrailerSize : 0);
}

std::string entry_header(EntryKind kind, uint64_t payload_size) {
  std::string out(magic_of(kind), kMagicSize);
  put_le(&out, kFormatVersion, 4);
  put_le(&out, payload_size, 8);
  return out;
}

std::string entry_trailer(EntryKind kind, std::string_view payload) {
  return has_trailer(kind) ? sha256_hex(payload) : std::string();
}

std::string encode_entry(EntryKind kind, std::string_view payload) {
  std::string out = entry_header(kind, payload.size());
  out.append(payload);
  out += entry_trailer(kind, payload);
  return out;
}

bool check_header(EntryKind kind, std::string_view head, uint64_t file_size, std::string* why) {
  if (head.size() < kHeaderSize || file_size < kHeaderSize) {
    *why = "truncated header (" + std::to_string(file_size) + " bytes)";
    return false;
  }
  if (std::memcmp(head.data(), magic_of(kind), kMagicSize) != 0) {
    *why = "wrong magic";
    return false;
  }
  uint64_t version = get_le(head, kMagicSize, 4);
  if (version != kFormatVersion) {
    *why = "unknown format version " + std::to_string(version) + " (this forge reads " +
           std::to_string(kFormatVersion) + ")";
    return false;
  }
  uint64_t length = get_le(head, kMagicSize + 4, 8);
  uint64_t overhead = entry_size(kind, 0);
  // Compare without overflow: a corrupt length can be anything up to 2^64-1.
  if (file_size < overhead || length != file_size - overhead) {
    *why = "length mismatch (header says " + std::to_string(length) + " payload bytes, file has " +
           std::to_string(file_size) + " bytes)";
    return false;
  }
  return true;
}

std::optional<std::string> decode_entry(EntryKind kind, std::string_view file, std::string* why) {
  if (!check_header(kind, file, file.size(), why)) return std::nullopt;
  size_t length = file.size() - entry_size(kind, 0);
  std::string_view payload = file.substr(kHeaderSize, length);
  if (has_trailer(kind)) {
    std::string_view trailer = file.substr(kHeaderSize + length);
    if (trailer != sha256_hex(payload)) {
      *why = "checksum mismatch";
      return std::nullopt;
    }
  }
  return std::string(payload);
}

}  // namespace forge::store
