// Store objects that hold JSON (evaluation records, reports), read back
// parsed: one reader for every stage and the GUI.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "store/store.h"

namespace forge {

// A store entry's text parsed (an object, or an action's record); null when
// it is missing or is not JSON.
inline nlohmann::json parse_json_entry(const std::optional<std::string>& text) {
  if (!text) return nullptr;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  return j.is_discarded() ? nlohmann::json(nullptr) : j;
}

// The object's JSON; null when it is missing from the store or is not JSON.
inline nlohmann::json get_json_object(store::Store& store, const std::string& digest) {
  return parse_json_entry(store.get_object(digest));
}

}  // namespace forge
