#pragma once
// Ctrl-C (SIGINT) or SIGTERM during `forge build`: the first stops the build
// at the next step boundary. Commands running for a step are stopped, steps
// that finished are kept, and the report of what exists is printed. A
// second signal ends the process at once.
#include <stdexcept>

namespace forge {

// Installs the handler for SIGINT and SIGTERM.
void install_interrupt_handler();
// True once a signal arrived (or set_interrupted(true)).
bool interrupted();
// What the handler does; for tests.
void set_interrupted(bool on);

// While one is alive, interrupted() reads false: a signal is kept for the
// first step instead of stopping what runs now. `forge build` holds one while
// it opens its session, whose toolchain probe (Python importing torch) takes
// seconds and must not be cut short into an error.
class InterruptHold {
 public:
  InterruptHold();
  ~InterruptHold();
  InterruptHold(const InterruptHold&) = delete;
  InterruptHold& operator=(const InterruptHold&) = delete;
};

// Thrown where work stops for an interruption (a search between evaluations).
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

}  // namespace forge
