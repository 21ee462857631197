#include "util/interrupt.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <ctime>

namespace forge {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
std::atomic<int> g_holds{0};
timespec g_first = {};  // when the first signal arrived

// A signal sent to the process and to its group (as `timeout` and some
// supervisors do) arrives twice within microseconds; only a repeat after
// this long is a second request.
constexpr double kRepeatSeconds = 0.5;

double since_first() {
  timespec now = {};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return double(now.tv_sec - g_first.tv_sec) + 1e-9 * double(now.tv_nsec - g_first.tv_nsec);
}

void on_signal(int sig) {
  if (g_interrupted) {
    if (since_first() < kRepeatSeconds) return;  // the same request, delivered twice
    // the second one: stop now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  clock_gettime(CLOCK_MONOTONIC, &g_first);
  g_interrupted = 1;
  static const char msg[] =
      "\nforge: interrupted: stopping after the current step (finished steps are kept; again to stop now)\n";
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool interrupted() { return g_interrupted != 0 && g_holds.load() == 0; }

InterruptHold::InterruptHold() { ++g_holds; }
InterruptHold::~InterruptHold() { --g_holds; }

void set_interrupted(bool on) { g_interrupted = on ? 1 : 0; }

}  // namespace forge
