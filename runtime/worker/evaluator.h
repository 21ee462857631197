// The evaluator: what main.cpp (the JSON-lines protocol loop) calls. Torch-free
// interface; the implementation (evaluate.cpp) is torch-linked.
#pragma once

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace forge::worker {

using json = nlohmann::ordered_json;  // replies keep the documented key order

// A malformed request: main replies {"id": ..., "error": what()} and goes on.
struct RequestError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A call whose verification cannot fit in the device's free memory, refused
// before anything is allocated: the reply adds "refused": "memory" (forge
// then leaves the target out instead of failing the build).
struct MemoryRefused : RequestError {
  using RequestError::RequestError;
};

struct Options {
  std::string backend = "auto";  // cpu | cuda | auto (cuda when available)
  double ceiling = 0;            // > 0: use this copy ceiling instead of measuring one
  int device_index = 0;          // CUDA device ordinal
  bool import_check = true;      // false (--no-import-check): tests of the run-time checks only
};

// What evaluate() answers: the reply line, and an exit code when the worker must
// exit after printing it (a sticky CUDA error, a candidate that changed the
// dispatcher): forge then starts a new worker.
struct Outcome {
  json reply;
  int exit_code = -1;  // -1: keep going
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual json hello() = 0;
  // Throws RequestError for a malformed request.
  virtual Outcome evaluate(const json& request) = 0;
};

// Initializes torch and the device, measures the copy ceiling (unless given).
std::unique_ptr<Evaluator> make_evaluator(const Options& options);

// Prints `reply` as the answer to the current request and exits with `code` at
// once, without unwinding (main.cpp). For a sticky CUDA error: destructors of
// device tensors could throw or hang on a broken context.
[[noreturn]] void reply_and_exit(const json& reply, int code);

}  // namespace forge::worker
