#include "util/hash.h"

#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <stdexcept>

namespace forge {
namespace {

std::string to_hex(const unsigned char* data, unsigned len) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(len * 2, '0');
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 15];
  }
  return out;
}

}  // namespace

struct Hasher::Impl {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Impl() { EVP_MD_CTX_free(ctx); }
};

Hasher::Hasher() : m_impl(std::make_unique<Impl>()) {
  if (!m_impl->ctx || EVP_DigestInit_ex(m_impl->ctx, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("sha256: EVP_DigestInit_ex failed");
}

Hasher::~Hasher() = default;

void Hasher::feed(std::string_view bytes) {
  EVP_DigestUpdate(m_impl->ctx, bytes.data(), bytes.size());
}

Hasher& Hasher::add(std::string_view tag, std::string_view value) {
  // Length-prefixed sections: "tag:len:value;" cannot be confused across boundaries.
  feed(tag);
  feed(":" + std::to_string(value.size()) + ":");
  feed(value);
  feed(";");
  return *this;
}

std::string Hasher::hex() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned len = 0;
  EVP_DigestFinal_ex(m_impl->ctx, md.data(), &len);
  return to_hex(md.data(), len);
}

std::string sha256_hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md.data(), &len, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("sha256: EVP_Digest failed");
  return to_hex(md.data(), len);
}

bool is_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace forge
