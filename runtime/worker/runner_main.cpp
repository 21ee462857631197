// forge_runner: where candidate code runs (docs/WORKER.md, "the runner").
//
//   forge_runner --fd N --backend cpu|cuda [--device N]
//
// Started by the judge (forge_worker) ahead of need, one per candidate. It
// holds the socket N to the judge, its log (fds 1 and 2, a memory file the
// judge reads) and /dev/null on fd 0; nothing leads to forge. It maps the
// exchange arena, loads the candidate under a first sandbox stage, checks that
// the load started no thread and pulled in no library that computes, installs
// the second stage and then calls the kernel on request. Torch-free; the CUDA
// build needs only the CUDA runtime.
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>

#if defined(FORGE_WORKER_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "device.h"
#include "runner_protocol.h"
#include "runner_threads.h"
#include "sandbox.h"

namespace forge::runner {
namespace {

using worker::Device;

int g_sock = -1;
int g_task_dir = -1;  // /proc/self/task, opened before the sandbox forbids opening
char* g_arena = nullptr;
int64_t g_arena_bytes = 0;
bool g_cuda = false;
void* g_stream = nullptr;
std::unique_ptr<Device> g_device;
using KernelFn = int (*)(const forge_call*);
using WorkspaceFn = int64_t (*)(const forge_call*);
KernelFn g_kernel = nullptr;
WorkspaceFn g_workspace = nullptr;

bool g_diagnose = false;

// FORGE_SANDBOX_DIAGNOSE: name the refused system call, then die of SIGSYS.
void on_sigsys(int, siginfo_t* info, void*) {
  char msg[96];
  int n = std::snprintf(msg, sizeof msg, "forge_runner: the sandbox refused system call %d\n", info->si_syscall);
  if (n > 0) (void)!::write(2, msg, static_cast<size_t>(n));
  ::signal(SIGSYS, SIG_DFL);
  ::raise(SIGSYS);
}

void copy_text(char* dst, size_t n, std::string_view s) {
  size_t k = std::min(n - 1, s.size());
  std::memcpy(dst, s.data(), k);
  dst[k] = '\0';
}

// Entries of /proc/self/task, re-read through the descriptor opened at start.
int count_threads() {
  if (g_task_dir < 0 || ::lseek(g_task_dir, 0, SEEK_SET) != 0) return -1;
  alignas(8) char buf[4096];
  int n = 0;
  for (;;) {
    long got = ::syscall(SYS_getdents64, g_task_dir, buf, sizeof buf);
    if (got < 0) return -1;
    if (got == 0) break;
    for (long off = 0; off < got;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + off);
      if (d->d_name[0] != '.') ++n;
      off += d->d_reclen;
    }
  }
  return n;
}

bool send_reply(const Reply& r) {
  return ::send(g_sock, &r, sizeof r, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof r);
}

Reply reply_for(const Request& q) {
  Reply r{};
  r.magic = kMagic;
  r.cmd = q.cmd;
  r.seq = q.seq;
  r.status = Status::Ok;
  return r;
}

Reply error(const Request& q, std::string_view text) {
  Reply r = reply_for(q);
  r.status = Status::Error;
  copy_text(r.text, sizeof r.text, text);
  return r;
}

// ---------------------------------------------------------------------------
// Attach and load

Reply attach(const Request& q, int fd) {
  if (g_arena) return error(q, "an arena is already attached");
  if (q.arena_bytes <= 0) return error(q, "empty arena");
  if (!g_cuda) {
    if (fd < 0) return error(q, "no arena descriptor came with the request");
    void* p = ::mmap(nullptr, static_cast<size_t>(q.arena_bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return error(q, std::string("mmap of the arena: ") + std::strerror(errno));
    g_arena = static_cast<char*>(p);
  } else {
#if defined(FORGE_WORKER_CUDA)
    if (fd >= 0) ::close(fd);
    cudaIpcMemHandle_t h;
    static_assert(sizeof h <= kIpcBytes);
    std::memcpy(&h, q.ipc, sizeof h);
    void* p = nullptr;
    cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) return error(q, std::string("cudaIpcOpenMemHandle: ") + cudaGetErrorString(e));
    g_arena = static_cast<char*>(p);
#endif
  }
  g_arena_bytes = q.arena_bytes;
  return reply_for(q);
}

// Libraries that would compute the op for the candidate (docs/CANDIDATE_ABI.md);
// the ELF import check refuses them as direct dependencies, this catches them
// however they were loaded.
constexpr const char* kComputeLibraries[] = {"libtorch", "libc10",     "libcaffe2", "libcublas", "libcudnn",
                                             "libcufft", "libcurand",  "libcusparse", "libcusolver", "libnccl",
                                             "libpython", "libnvrtc",  "libmkl",    "libopenblas", "libblas",
                                             "liblapack", "libdnnl",   "libgomp",   "libomp",    "libiomp",
                                             "libtbb"};

std::string compute_library_loaded() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        std::string_view path = info->dlpi_name ? info->dlpi_name : "";
        std::string_view base = path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
        for (const char* lib : kComputeLibraries)
          if (base.substr(0, std::strlen(lib)) == lib) {
            *static_cast<std::string*>(data) = std::string(base);
            return 1;
          }
        return 0;
      },
      &found);
  return found;
}

Reply refused(const Request& q, const char* reason, std::string_view text) {
  Reply r = reply_for(q);
  r.status = Status::Refused;
  copy_text(r.reason, sizeof r.reason, reason);
  copy_text(r.text, sizeof r.text, text);
  return r;
}

Reply load(const Request& q) {
  Reply ok = reply_for(q);
  if (g_kernel) return error(q, "a candidate is already loaded");
  const int before = count_threads();
  ok.value = before;
  SandboxOptions stage1;
  stage1.read_only_open = true;
  stage1.allow_threads = g_cuda;
  stage1.trap = g_diagnose;
  if (auto e = install_sandbox(stage1); !e.empty()) return error(q, "sandbox: " + e);
  std::string path(q.path, strnlen(q.path, sizeof q.path));
  void* h = nullptr;
  try {
    h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  } catch (...) {
    return refused(q, "exception", "a constructor of the candidate threw");
  }
  if (!h) {
    const char* e = ::dlerror();
    return refused(q, "bad_candidate", std::string("dlopen failed: ") + (e ? e : "unknown error"));
  }
  g_kernel = reinterpret_cast<KernelFn>(::dlsym(h, "forge_kernel"));
  g_workspace = reinterpret_cast<WorkspaceFn>(::dlsym(h, "forge_workspace_bytes"));
  if (!g_kernel) return refused(q, "bad_candidate", "no symbol forge_kernel in the candidate");
  if (auto lib = compute_library_loaded(); !lib.empty())
    return refused(q, "library_call", "loading the candidate brought in " + lib);
  const int after = count_threads();
  if (before >= 0 && after > before)
    return refused(q, "forbidden",
                   "loading the candidate started " + std::to_string(after - before) + " thread(s)");
  SandboxOptions stage2;
  stage2.allow_threads = g_cuda;
  stage2.trap = g_diagnose;
  if (auto e = install_sandbox(stage2); !e.empty()) return error(q, "sandbox: " + e);
  ok.threads = after;
  return ok;
}

// ---------------------------------------------------------------------------
// Calls

struct CallBuffers {
  forge_tensor in[kMaxInputs];
  forge_tensor out[kMaxOutputs];
  forge_scalar sc[kMaxScalars];
  forge_call call;
  alignas(16) unsigned char host[kMaxInputs][kInlineBytes];  // the inputs that came in their message
};

// `host`: where an input carried in its message lives (nullptr: none may be).
bool view(const TensorMsg& m, forge_tensor* t, unsigned char* host, std::string* why) {
  std::memset(t, 0, sizeof *t);
  t->ndim = m.ndim;
  t->dtype = m.dtype;
  if (m.ndim > FORGE_MAX_DIMS || m.ndim < -1) return *why = "bad ndim", false;
  for (int d = 0; d < FORGE_MAX_DIMS; ++d) {
    t->sizes[d] = m.sizes[d];
    t->strides[d] = m.strides[d];
  }
  if (m.offset == kHostInline) {
    if (!host) return *why = "an output in host memory", false;
    std::memcpy(host, m.host, kInlineBytes);
    t->data = host;
    return true;
  }
  if (m.offset < 0) {
    t->data = nullptr;
    return true;
  }
  if (m.offset > g_arena_bytes) return *why = "a tensor outside the arena", false;
  t->data = g_arena + m.offset;
  return true;
}

bool bind(const Request& q, CallBuffers& b, std::string* why) {
  if (!g_arena) return *why = "no arena attached", false;
  if (q.n_inputs < 0 || q.n_inputs > kMaxInputs || q.n_outputs < 0 || q.n_outputs > kMaxOutputs ||
      q.n_scalars < 0 || q.n_scalars > kMaxScalars)
    return *why = "too many arguments", false;
  for (int i = 0; i < q.n_inputs; ++i)
    if (!view(q.inputs[i], &b.in[i], b.host[i], why)) return false;
  for (int i = 0; i < q.n_outputs; ++i)
    if (!view(q.outputs[i], &b.out[i], nullptr, why)) return false;
  std::memcpy(b.sc, q.scalars, sizeof(forge_scalar) * static_cast<size_t>(q.n_scalars));
  b.call = forge_call{};
  b.call.inputs = b.in;
  b.call.n_inputs = q.n_inputs;
  b.call.outputs = b.out;
  b.call.n_outputs = q.n_outputs;
  b.call.scalars = b.sc;
  b.call.n_scalars = q.n_scalars;
  if (q.workspace_offset >= 0) {
    if (q.workspace_offset > g_arena_bytes) return *why = "workspace outside the arena", false;
    b.call.workspace = g_arena + q.workspace_offset;
    b.call.workspace_bytes = q.workspace_bytes;
  }
  b.call.stream = g_stream;
  return true;
}

// Which part of the call the candidate changed, "" when none.
std::string changed(const CallBuffers& now, const CallBuffers& was, int n_in, int n_out, int n_sc) {
  if (std::memcmp(&now.call, &was.call, sizeof(forge_call)) != 0) return "the forge_call struct";
  for (int k = 0; k < n_out; ++k)
    if (std::memcmp(&now.out[k], &was.out[k], sizeof(forge_tensor)) != 0) {
      if (now.out[k].data != was.out[k].data) {
        for (int i = 0; i < n_in; ++i)
          if (was.in[i].data && now.out[k].data == was.in[i].data)
            return "outputs[" + std::to_string(k) + "].data (at an input)";
        return "outputs[" + std::to_string(k) + "].data";
      }
      return "outputs[" + std::to_string(k) + "] (sizes, strides, ndim or dtype)";
    }
  for (int k = 0; k < n_in; ++k)
    if (std::memcmp(&now.in[k], &was.in[k], sizeof(forge_tensor)) != 0) return "inputs[" + std::to_string(k) + "]";
  for (int k = 0; k < n_in; ++k)
    if (std::memcmp(now.host[k], was.host[k], kInlineBytes) != 0) return "inputs[" + std::to_string(k) + "] (its host value)";
  for (int k = 0; k < n_sc; ++k)
    if (std::memcmp(&now.sc[k], &was.sc[k], sizeof(forge_scalar)) != 0) return "scalars[" + std::to_string(k) + "]";
  return {};
}

Reply call(const Request& q) {
  Reply r = reply_for(q);
  if (!g_kernel) return error(q, "no candidate loaded");
  static CallBuffers b, saved;  // static: large, and the candidate's stack stays its own
  std::string why;
  if (!bind(q, b, &why)) return error(q, why);
  std::memcpy(&saved, &b, sizeof b);
  const bool run_kernel = q.cmd != Cmd::Nop && q.cmd != Cmd::Replay;
  std::string thrown;
  bool threw = false;
  auto body = [&] {
    try {
      if (run_kernel) r.rc = g_kernel(&b.call);
    } catch (const std::exception& e) {
      threw = true;
      thrown = e.what();
    } catch (...) {
      threw = true;
      thrown = "an exception that is not a std::exception";
    }
  };
  if (q.cmd == Cmd::Graph) {
    std::string e = g_device->capture(g_stream, body);
    if (!e.empty()) copy_text(r.text, sizeof r.text, e);
  } else if (q.cmd == Cmd::Replay) {
    std::string e = g_device->replay(g_stream);
    if (!e.empty()) copy_text(r.text, sizeof r.text, e);
  } else if (q.flags & kTimed) {
    // CUDA: the events go on the legacy default stream, which the call's
    // stream (a blocking one) and every other blocking stream, the per-thread
    // default stream included, synchronize with: work the kernel put on any
    // of them is inside the interval.
    r.us = g_device->time_us(nullptr, body);
  } else {
    body();
  }
  // Everything the call left on any stream of this process finishes before the
  // judge looks at the outputs (and before it stops its own clock).
  bool sticky = false;
  std::string derr = g_device->check_error(&sticky);
  copy_text(r.device_error, sizeof r.device_error, derr);
  r.sticky = sticky;
  r.threads = count_threads();
  copy_text(r.changed, sizeof r.changed, changed(b, saved, q.n_inputs, q.n_outputs, q.n_scalars));
  if (threw) {
    r.status = Status::Exception;
    copy_text(r.text, sizeof r.text, thrown);
  }
  return r;
}

// ---------------------------------------------------------------------------
// Calls from several threads at once (runner_threads.h)

CallBuffers g_slots[kMaxSlots], g_slots_saved[kMaxSlots];
int g_slot_args[kMaxSlots][3];  // inputs, outputs, scalars of each slot's call
int g_staged = 0;                // slots bound since the last Together

Reply stage(const Request& q) {
  if (!g_kernel) return error(q, "no candidate loaded");
  if (q.slot < 0 || q.slot >= kMaxSlots) return error(q, "no such slot");
  std::string why;
  if (!bind(q, g_slots[q.slot], &why)) return error(q, why);
  std::memcpy(&g_slots_saved[q.slot], &g_slots[q.slot], sizeof(CallBuffers));
  g_slot_args[q.slot][0] = q.n_inputs;
  g_slot_args[q.slot][1] = q.n_outputs;
  g_slot_args[q.slot][2] = q.n_scalars;
  g_staged = std::max(g_staged, q.slot + 1);
  Reply r = reply_for(q);
  r.threads = count_threads();
  return r;
}

Reply together(const Request& q) {
  Reply r = reply_for(q);
  if (!g_kernel) return error(q, "no candidate loaded");
  const int n = q.slot;
  if (n < 1 || n > g_staged || n > call_threads()) return error(q, "slots not staged, or no call threads left");
  g_staged = 0;
#if defined(FORGE_WORKER_CUDA)
  // One stream per thread: the calls overlap on the device too.
  static cudaStream_t streams[kMaxSlots] = {};
  if (g_cuda)
    for (int k = 0; k < n; ++k) {
      if (!streams[k] && cudaStreamCreateWithFlags(&streams[k], cudaStreamDefault) != cudaSuccess)
        return error(q, "cannot create a stream for the call threads");
      g_slots[k].call.stream = g_slots_saved[k].call.stream = streams[k];
    }
#endif
  int rcs[kMaxSlots] = {};
  bool threw[kMaxSlots] = {};
  static std::string thrown[kMaxSlots];
  run_on_call_threads(n, [&](int k) {
    try {
      rcs[k] = g_kernel(&g_slots[k].call);
    } catch (const std::exception& e) {
      threw[k] = true;
      thrown[k] = e.what();
    } catch (...) {
      threw[k] = true;
      thrown[k] = "an exception that is not a std::exception";
    }
  });
  bool sticky = false;
  copy_text(r.device_error, sizeof r.device_error, g_device->check_error(&sticky));
  r.sticky = sticky;
  r.threads = count_threads();
  for (int k = 0; k < n; ++k) {
    r.slot_rc[k] = rcs[k];
    if (r.rc == 0) r.rc = rcs[k];
    if (threw[k] && r.status == Status::Ok) {
      r.status = Status::Exception;
      copy_text(r.text, sizeof r.text, thrown[k]);
    }
    std::string c = changed(g_slots[k], g_slots_saved[k], g_slot_args[k][0], g_slot_args[k][1], g_slot_args[k][2]);
    if (!c.empty() && !*r.changed) copy_text(r.changed, sizeof r.changed, c);
  }
  return r;
}

Reply end_threads(const Request& q) {
  const int before = count_threads();
  const int joined = stop_call_threads();
  // pthread_join returns when the exiting thread clears its tid, which the
  // kernel does before it removes the thread from /proc/self/task: a joined
  // thread can stay listed for a moment, and the judge would take it for one
  // the candidate holds. Wait up to 0.5 s for the joined ones to go; a thread
  // the candidate holds never does.
  int now = count_threads();
  for (int waited = 0; before >= 0 && now > before - joined && waited < 500; ++waited) {
    const struct timespec ms = {0, 1000000};
    ::nanosleep(&ms, nullptr);
    now = count_threads();
  }
  Reply r = reply_for(q);
  r.threads = now;
  return r;
}

Reply workspace(const Request& q) {
  Reply r = reply_for(q);
  if (!g_kernel) return error(q, "no candidate loaded");
  if (!g_workspace) return r;  // value 0
  static CallBuffers b;
  std::string why;
  if (!bind(q, b, &why)) return error(q, why);
  try {
    r.value = g_workspace(&b.call);
  } catch (const std::exception& e) {
    r.status = Status::Exception;
    copy_text(r.text, sizeof r.text, e.what());
  } catch (...) {
    r.status = Status::Exception;
    copy_text(r.text, sizeof r.text, "an exception that is not a std::exception");
  }
  r.threads = count_threads();
  return r;
}

// One request and, for Attach, the descriptor that came with it.
bool receive(Request* q, int* fd) {
  *fd = -1;
  iovec iov{q, sizeof *q};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(g_sock, &m, MSG_CMSG_CLOEXEC);
  if (n != static_cast<ssize_t>(sizeof *q)) return false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(fd, CMSG_DATA(c), sizeof(int));
  return q->magic == kMagic;
}

int usage(const char* msg) {
  std::fprintf(stderr, "forge_runner: %s\nusage: forge_runner --fd N --backend cpu|cuda [--device N]\n", msg);
  return 2;
}

}  // namespace
}  // namespace forge::runner

int main(int argc, char** argv) {
  using namespace forge::runner;
  std::string backend = "cpu";
  [[maybe_unused]] int device = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = (a == "--fd" || a == "--backend" || a == "--device") ? next() : nullptr;
    if (a == "--fd" && v) g_sock = std::atoi(v);
    else if (a == "--backend" && v) backend = v;
    else if (a == "--device" && v) device = std::atoi(v);
    else return usage(("bad argument " + a).c_str());
  }
  if (g_sock < 0) return usage("--fd is required");
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the judge
  if (::getppid() == 1) return 2;
  g_task_dir = ::open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  g_cuda = backend == "cuda";
  if (const char* d = std::getenv("FORGE_SANDBOX_DIAGNOSE"); d && *d == '1') {
    g_diagnose = true;
    struct sigaction sa {};
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    ::sigaction(SIGSYS, &sa, nullptr);
  }
  if (g_cuda) {
#if defined(FORGE_WORKER_CUDA)
    g_device = forge::worker::make_cuda_device(device, /*flush_buffer=*/false);
    // A blocking stream: it synchronizes with the legacy default stream, on
    // which the runner times calls.
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamDefault) != cudaSuccess) {
      std::fprintf(stderr, "forge_runner: cannot create the stream\n");
      return 3;
    }
    g_stream = s;
#else
    return usage("this runner was built without CUDA support");
#endif
  } else {
    g_device = forge::worker::make_cpu_device(/*flush_buffer=*/false);
  }

  // One malloc arena for every thread: a thread's own arena grows and shrinks
  // with mprotect and MAP_FIXED mappings, which the sandbox refuses, so a
  // kernel allocating on a call thread (or the thread's exit) would be killed.
  ::mallopt(M_ARENA_MAX, 1);
  start_call_threads(kMaxSlots);

  for (;;) {
    Request q;
    int fd = -1;
    if (!receive(&q, &fd)) return 0;  // the judge hung up or spoke nonsense
    Reply r;
    switch (q.cmd) {
      case Cmd::Attach: r = attach(q, fd); break;
      case Cmd::Load: r = load(q); break;
      case Cmd::Call:
      case Cmd::Nop:
      case Cmd::Graph:
      case Cmd::Replay: r = call(q); break;
      case Cmd::Workspace: r = workspace(q); break;
      case Cmd::Stage: r = stage(q); break;
      case Cmd::Together: r = together(q); break;
      case Cmd::EndThreads: r = end_threads(q); break;
      case Cmd::Quit:
        r = reply_for(q);
        send_reply(r);
        std::_Exit(0);
      default: r = error(q, "unknown command"); break;
    }
    if (fd >= 0 && q.cmd != Cmd::Attach) ::close(fd);
    if (!send_reply(r)) return 0;
    if (r.sticky) std::_Exit(3);  // the context is unusable: the judge starts another runner
  }
}
