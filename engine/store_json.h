// Store objects that hold JSON (evaluation records, reports), read back
// parsed: one reader for every stage and the GUI.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "store/store.h"

namespace forge {

// The object's JSON; null when it is missing from the store or is not JSON.
inline nlohmann::json get_json_object(store::Store& store, const std::string& digest) {
  auto text = store.get_object(digest);
  if (!text) return nullptr;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  return j.is_discarded() ? nlohmann::json(nullptr) : j;
}

}  // namespace forge
