// The judge-runner protocol (docs/WORKER.md, "the runner"): fixed-size binary
// messages over a SOCK_SEQPACKET socket pair, one request, one reply. The
// judge (forge_worker, torch-linked) owns every verdict; the runner
// (forge_runner, torch-free) only loads the candidate and calls it on buffers
// in the exchange arena, which both processes map. Pointers never cross: a
// tensor's data travels as a byte offset into the arena.
//
// Everything a reply says is the candidate's word (it shares the runner's
// address space): the judge checks it, never trusts it.
#pragma once

#include <cstdint>

#include "forge_kernel.h"

namespace forge::runner {

constexpr uint32_t kMagic = 0x46524731;  // "FRG1"
constexpr int kMaxInputs = 32;
constexpr int kMaxOutputs = 8;
constexpr int kMaxScalars = 32;
constexpr int kTextBytes = 512;
constexpr int kPathBytes = 1024;
constexpr int kIpcBytes = 64;  // sizeof(cudaIpcMemHandle_t)
constexpr int kMaxSlots = 4;   // calls at once in Together (the runner's call threads)

enum class Cmd : uint32_t {
  Attach = 1,     // map the arena: the memfd comes as SCM_RIGHTS (CPU) or ipc (CUDA)
  Load = 2,       // dlopen `path`, check the process, install the sandbox
  Call = 3,       // call forge_kernel once (timed when kTimed)
  Workspace = 4,  // call forge_workspace_bytes
  Nop = 5,        // a Call without the kernel: the judge's measure of the overhead
  Graph = 6,      // CUDA: capture the call in a CUDA graph (nothing runs)
  Quit = 7,       // reply Bye and exit
  Replay = 8,     // CUDA: launch the graph Graph captured, once
  Stage = 9,      // bind the call to slot `slot` (nothing runs)
  Together = 10,  // call slots [0, slot) at once, each from its own thread
  EndThreads = 11,  // end the call threads (runner_threads.h)
};

// Reply status.
enum class Status : int32_t {
  Ok = 0,
  Exception = 1,  // a C++ exception escaped the candidate; text has what()
  Error = 2,      // the runner could not do what was asked; text says why
  Refused = 3,    // Load: the candidate was refused; reason and text say why
};

// A host tensor beside CUDA ones (a Python number as a 0-dim CPU tensor, which
// the CUDA arena cannot hold) travels in its message, at most kInlineBytes.
constexpr int64_t kHostInline = -2;
constexpr int kInlineBytes = 16;

struct TensorMsg {
  int64_t offset;  // bytes from the arena base; -1: an absent (None) tensor; kHostInline: in `host`
  int64_t sizes[FORGE_MAX_DIMS];
  int64_t strides[FORGE_MAX_DIMS];
  int32_t ndim;
  int32_t dtype;
  alignas(8) unsigned char host[kInlineBytes];
};

constexpr uint32_t kTimed = 1;  // Call/Nop: time the call on the runner's clock

struct Request {
  uint32_t magic;
  Cmd cmd;
  uint64_t seq;
  uint32_t flags;
  int32_t slot;  // Stage: the slot; Together: how many slots
  int32_t n_inputs, n_outputs, n_scalars;
  int64_t workspace_offset;  // -1: none
  int64_t workspace_bytes;
  int64_t arena_bytes;       // Attach
  char ipc[kIpcBytes];       // Attach, CUDA
  char path[kPathBytes];     // Load
  TensorMsg inputs[kMaxInputs];
  TensorMsg outputs[kMaxOutputs];
  forge_scalar scalars[kMaxScalars];
};

struct Reply {
  uint32_t magic;
  Cmd cmd;
  uint64_t seq;
  Status status;
  int32_t rc;             // forge_kernel's return (Together: the first nonzero one)
  int32_t slot_rc[kMaxSlots];  // Together: each slot's return
  double us;              // kTimed: the runner's time of the call
  int32_t threads;        // threads of the runner after the call
  int32_t sticky;         // CUDA: the context is unusable
  int64_t value;          // Workspace: bytes; Load: threads before the load
  char reason[32];        // Refused: the reply reason
  char changed[64];       // "" or which part of the call the candidate modified
  char device_error[160]; // CUDA error after the call, "" when none
  char text[kTextBytes];
};

}  // namespace forge::runner
