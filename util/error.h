// Error convention (one per layer, one place that prints):
// - low layers return std::optional / status records for expected misses;
// - anything the user must see is thrown as forge::Error and printed once by
//   cli/main.cpp as "forge: error: <message>" (exit 1);
// - UsageError (bad command line) and ManifestError (bad forge.yaml) exit 2.
//   ManifestError's message is already formatted as "file:LINE:COL: msg",
//   the source line and a caret, so main prints it verbatim.
#pragma once

#include <stdexcept>
#include <string>

namespace forge {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct UsageError : Error {
  using Error::Error;
};

struct ManifestError : Error {
  using Error::Error;
};

}  // namespace forge
