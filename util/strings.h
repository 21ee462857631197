// Small string helpers shared by the CLI and the manifest.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace forge {

// Levenshtein distance.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` within `max_distance` edits, or "" if none.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates,
                          size_t max_distance = 2);

}  // namespace forge
