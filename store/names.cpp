#include "store/names.h"

#include <stdexcept>

#include "util/hash.h"

namespace forge::store {
namespace {

constexpr size_t kMaxRefName = 200;

bool is_ref_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

bool is_valid_component(std::string_view part) {
  if (part.empty() || part == "." || part == "..") return false;
  if (part.find(".tmp.") != std::string_view::npos) return false;
  for (char c : part)
    if (!is_ref_char(c)) return false;
  return true;
}

}  // namespace

void check_sha256_hex(std::string_view hex, const char* what) {
  if (!is_sha256_hex(hex))
    throw std::invalid_argument(std::string("store: ") + what +
                                " is not 64 lower-case hex characters: '" + std::string(hex) + "'");
}

bool is_valid_ref_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxRefName) return false;
  size_t start = 0;
  while (true) {
    size_t slash = name.find('/', start);
    std::string_view part = name.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (!is_valid_component(part)) return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

void check_ref_name(std::string_view name) {
  if (!is_valid_ref_name(name))
    throw std::invalid_argument("store: invalid ref name '" + std::string(name) +
                                "' (want components of [A-Za-z0-9._-] joined by '/')");
}

}  // namespace forge::store
