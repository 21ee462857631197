// Encoding of one store file (object, action record or ref); the layout is
// described in store/local_store.h. Pure functions over bytes: no I/O here, so
// every corruption case is testable without a disk.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace forge::store {

enum class EntryKind { kObject, kAction, kRef };

// Bumped whenever the bytes of any entry, or the folder layout, change.
inline constexpr uint32_t kFormatVersion = 1;
// magic (8) + version (u32 LE) + payload length (u64 LE).
inline constexpr size_t kHeaderSize = 20;
// Actions and refs end with the lower-case hex sha256 of their payload.
inline constexpr size_t kTrailerSize = 64;

const char* magic_of(EntryKind kind);
bool has_trailer(EntryKind kind);
// Size of the whole file holding `payload_size` bytes of payload.
uint64_t entry_size(EntryKind kind, uint64_t payload_size);

// The pieces of a file, so a large payload can be written without a copy:
// entry_header(kind, n) + payload + entry_trailer(kind, payload).
std::string entry_header(EntryKind kind, uint64_t payload_size);
std::string entry_trailer(EntryKind kind, std::string_view payload);  // "" for objects
// All three joined.
std::string encode_entry(EntryKind kind, std::string_view payload);

// Checks the header (the first kHeaderSize bytes of `head`, or fewer when the
// file is that short) against a file of `file_size` bytes. Returns false and
// sets *why (a short phrase like "wrong magic") when they do not fit.
bool check_header(EntryKind kind, std::string_view head, uint64_t file_size, std::string* why);

// The payload of a whole file, or std::nullopt with *why set when the header,
// length or trailer checksum is wrong. Objects are not hashed here: their
// digest is their name, which only the caller knows.
std::optional<std::string> decode_entry(EntryKind kind, std::string_view file, std::string* why);

}  // namespace forge::store
