// Argument checks shared by every Store implementation, so a test against the
// memory store rejects exactly what the local store rejects. A bad key, digest
// or ref name is a programming error, not a store failure: these throw
// std::invalid_argument instead of warning.
#pragma once

#include <string>
#include <string_view>

namespace forge::store {

// Throws std::invalid_argument unless `hex` is 64 lower-case hex characters.
// `what` ("digest", "action key") names the argument in the message.
void check_sha256_hex(std::string_view hex, const char* what);

// A ref name is a relative path of one or more components separated by '/',
// each made of [A-Za-z0-9._-], none empty, "." or "..", and none containing
// ".tmp." (that marks the store's own temp files). At most 200 characters.
bool is_valid_ref_name(std::string_view name);
// Throws std::invalid_argument unless is_valid_ref_name(name).
void check_ref_name(std::string_view name);

}  // namespace forge::store
