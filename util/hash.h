// SHA-256 content hashing (OpenSSL's EVP, not a hand-written digest).
//
// Hasher builds step keys from typed sections: add("flags", "-O2") feeds the
// tag, its length, the value and its length, so ("-I", "-O2") and ("-I-O2")
// never collide and reordering sections changes the key.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace forge {

// Lower-case hex SHA-256 of bytes.
std::string sha256_hex(std::string_view bytes);

class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  Hasher& add(std::string_view tag, std::string_view value);
  // Hex digest; the hasher must not be used afterwards.
  std::string hex();

 private:
  void feed(std::string_view bytes);
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// True when s is 64 lower-case hex characters (a sha256 digest as we print it).
bool is_sha256_hex(std::string_view s);

}  // namespace forge
