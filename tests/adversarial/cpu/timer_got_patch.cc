// CHEAT (class 7, timer tampering; spelling: patching the main executable's
// GOT). On its first call the kernel finds the worker executable with
// dl_iterate_phdr (its first entry), walks its relocations to the GOT slot of
// std::chrono::steady_clock::now() (the clock the CPU benchmark times with),
// makes the page writable (mprotect: no static rule, no import refused) and
// points the slot at its own hook. The hook returns the real time minus an
// offset; each call of the kernel measures itself and, just before
// returning, adds 90% of its own duration to the offset: the reading the
// worker takes right after the call is that much earlier, so every timed call
// of the candidate looks 10x shorter, while stock calls (no offset change
// inside them) time correctly and the clock stays monotonic. The results are
// honest. Today "accepted", ~10x the honest speedup.
// Expected (new worker): "timing_mismatch" -- the judge times (or cross-
// checks) with its own clock in its own process, which the candidate cannot
// patch, and the runner's figures disagree with it.
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "forge_kernel.h"

namespace {
// The honest softmax of softmax_ok.cc, one row at a time.
void softmax_rows(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = in + r * cols;
    float* yr = out + r * cols;
    float m = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      yr[c] = std::exp(xr[c] - m);
      sum += yr[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
}
}  // namespace

namespace {
using Clock = std::chrono::steady_clock;
using Now = Clock::time_point (*)();

const Now g_real_now = &Clock::now;  // this library's own binding: libstdc++'s function
std::atomic<int64_t> g_offset_ns{0};

Clock::time_point hooked_now() { return g_real_now() - std::chrono::nanoseconds(g_offset_ns.load()); }

// The GOT slot of `symbol` in the first object dl_iterate_phdr reports (the
// executable), or nullptr.
struct Slot {
  const char* symbol;
  void** slot;
};

int find_slot(dl_phdr_info* info, size_t, void* arg) {
  Slot* q = static_cast<Slot*>(arg);
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 1;
  auto addr = [&](ElfW(Addr) p) { return p < info->dlpi_addr ? p + info->dlpi_addr : p; };
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Rela)* tables[2] = {nullptr, nullptr};
  size_t sizes[2] = {0, 0};
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    switch (dyn->d_tag) {
      case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(addr(dyn->d_un.d_ptr)); break;
      case DT_STRTAB: strtab = reinterpret_cast<const char*>(addr(dyn->d_un.d_ptr)); break;
      case DT_JMPREL: tables[0] = reinterpret_cast<const ElfW(Rela)*>(addr(dyn->d_un.d_ptr)); break;
      case DT_PLTRELSZ: sizes[0] = dyn->d_un.d_val; break;
      case DT_RELA: tables[1] = reinterpret_cast<const ElfW(Rela)*>(addr(dyn->d_un.d_ptr)); break;
      case DT_RELASZ: sizes[1] = dyn->d_un.d_val; break;
    }
  }
  if (!symtab || !strtab) return 1;
  for (int t = 0; t < 2; ++t) {
    if (!tables[t]) continue;
    for (size_t k = 0; k < sizes[t] / sizeof(ElfW(Rela)); ++k) {
      const ElfW(Rela)& r = tables[t][k];
      const uint32_t type = ELF64_R_TYPE(r.r_info), sym = ELF64_R_SYM(r.r_info);
      if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || sym == 0) continue;
      if (std::strcmp(strtab + symtab[sym].st_name, q->symbol) == 0) {
        q->slot = reinterpret_cast<void**>(info->dlpi_addr + r.r_offset);
        return 1;
      }
    }
  }
  return 1;  // only the executable
}

void install_hook() {
  Slot q{"_ZNSt6chrono3_V212steady_clock3nowEv", nullptr};
  dl_iterate_phdr(find_slot, &q);
  if (!q.slot) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(q.slot) & ~(page - 1);
  if (mprotect(reinterpret_cast<void*>(start), page, PROT_READ | PROT_WRITE) != 0) return;
  *q.slot = reinterpret_cast<void*>(&hooked_now);
}

std::once_flag g_once;
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1)
    return 1;
  const int64_t cols = x.sizes[x.ndim - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) rows *= x.sizes[d];
  const float* in = static_cast<const float*>(x.data);
  float* out = static_cast<float*>(call->outputs[0].data);
  std::call_once(g_once, install_hook);
  const Clock::time_point t0 = g_real_now();
  softmax_rows(in, out, rows, cols);
  const int64_t took = std::chrono::duration_cast<std::chrono::nanoseconds>(g_real_now() - t0).count();
  g_offset_ns.fetch_add(took * 9 / 10);  // the worker's next reading comes 90% "earlier"
  return 0;
}
