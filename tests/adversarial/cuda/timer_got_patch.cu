// CHEAT (class 7, timer tampering; spelling: patching the runner's GOT slot
// of cudaEventElapsedTime, found without any imported introspection). On its
// first call the kernel takes its own return address (it points into the
// executable that called it), walks back page by page to that executable's
// ELF header, reads its program headers, dynamic section and relocations to
// the GOT slot of cudaEventElapsedTime, makes the page writable with a raw
// mprotect syscall (inline asm: no mprotect import, no static rule; no
// dl_iterate_phdr, _r_debug, dladdr or getauxval either) and points the slot
// at a hook. The hook reports a tenth of the real elapsed time, but only for a
// reading taken after the candidate ran (empty calls and others time right).
// The old slot is the real function, so cudaEventElapsedTime is never named
// in an import. The results are honest.
// Expected (new worker): "timing_mismatch" where the call takes longer than
// ~17 us (the judge's host clock around the call disagrees with the runner's
// figure by more than its 15 us floor), else "neutral" (a smaller
// under-report is added back to the candidate's figures). If the walk meets
// an unmapped gap below the code: "crashed (signal 11: Segmentation fault)".
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "forge_kernel.h"

namespace {

constexpr int kThreads = 256;

__device__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? scratch[threadIdx.x] : (is_max ? -INFINITY : 0.f);
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) {
      float other = __shfl_xor_sync(0xffffffffu, v, o);
      v = is_max ? fmaxf(v, other) : v + other;
    }
  if (threadIdx.x == 0) scratch[0] = v;
  __syncthreads();
  v = scratch[0];
  __syncthreads();
  return v;
}

// The honest softmax of softmax_ok.cu: one block per row.
__global__ void softmax_rows(const float* in, float* out, int64_t cols) {
  __shared__ float scratch[kThreads / 32];
  const float* x = in + blockIdx.x * cols;
  float* y = out + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, x[c]);
  m = block_reduce(m, true, scratch);
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) s += expf(x[c] - m);
  s = block_reduce(s, false, scratch);
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) y[c] = expf(x[c] - m) / s;
}

// softmax_ok.cu's checks: rows and cols of a float32 call over the last dim.
bool shape_of(const forge_call* call, int64_t* rows, int64_t* cols) {
  const forge_tensor& x = call->inputs[0];
  if (call->n_inputs != 1 || call->n_outputs != 1 || x.dtype != FORGE_FLOAT32 || x.ndim < 1) return false;
  *cols = x.sizes[x.ndim - 1];
  *rows = 1;
  for (int d = 0; d + 1 < x.ndim; ++d) *rows *= x.sizes[d];
  return true;
}

const float* in_of(const forge_call* call) { return static_cast<const float*>(call->inputs[0].data); }
float* out_of(const forge_call* call) { return static_cast<float*>(call->outputs[0].data); }
cudaStream_t stream_of(const forge_call* call) { return static_cast<cudaStream_t>(call->stream); }

}  // namespace

namespace {
using Elapsed = cudaError_t (*)(float*, cudaEvent_t, cudaEvent_t);
Elapsed g_real = nullptr;
std::atomic<bool> g_ran{false};

cudaError_t hooked(float* ms, cudaEvent_t a, cudaEvent_t b) {
  const cudaError_t e = g_real(ms, a, b);
  if (e == cudaSuccess && g_ran.exchange(false)) *ms *= 0.1f;
  return e;
}

long raw3(long n, long a, long b, long c) {
  long ret;
  asm volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
}

void** find_slot(const void* code, const char* symbol) {
  uintptr_t p = reinterpret_cast<uintptr_t>(code) & ~uintptr_t(0xfff);
  for (int pages = 0; std::memcmp(reinterpret_cast<const void*>(p), ELFMAG, SELFMAG) != 0; ++pages) {
    if (pages > (1 << 16)) return nullptr;
    p -= 0x1000;
  }
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(p);
  const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(p + eh->e_phoff);
  uintptr_t bias = 0;
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < eh->e_phnum; ++i)
    if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) bias = p - (ph[i].p_vaddr & ~uintptr_t(0xfff));
  for (int i = 0; i < eh->e_phnum; ++i)
    if (ph[i].p_type == PT_DYNAMIC) dyn = reinterpret_cast<const ElfW(Dyn)*>(bias + ph[i].p_vaddr);
  if (!dyn) return nullptr;
  auto addr = [&](ElfW(Addr) a) { return a < bias ? a + bias : a; };
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
  if (!symtab || !strtab) return nullptr;
  for (int t = 0; t < 2; ++t) {
    if (!tables[t]) continue;
    for (size_t k = 0; k < sizes[t] / sizeof(ElfW(Rela)); ++k) {
      const ElfW(Rela)& r = tables[t][k];
      const uint32_t type = ELF64_R_TYPE(r.r_info), sym = ELF64_R_SYM(r.r_info);
      if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || sym == 0) continue;
      if (std::strcmp(strtab + symtab[sym].st_name, symbol) == 0) return reinterpret_cast<void**>(bias + r.r_offset);
    }
  }
  return nullptr;
}

bool install(const void* caller) {
  void** slot = find_slot(caller, "cudaEventElapsedTime");
  if (!slot) return false;
  const uintptr_t page = reinterpret_cast<uintptr_t>(slot) & ~uintptr_t(0xfff);
  if (raw3(SYS_mprotect, static_cast<long>(page), 0x1000, PROT_READ | PROT_WRITE) != 0) return false;
  g_real = reinterpret_cast<Elapsed>(*slot);
  *slot = reinterpret_cast<void*>(&hooked);
  return true;
}
}  // namespace

extern "C" int forge_kernel(const forge_call* call) {
  static const bool patched = install(__builtin_return_address(0));
  int64_t rows, cols;
  if (!shape_of(call, &rows, &cols)) return 1;
  if (rows == 0) return 0;
  softmax_rows<<<static_cast<unsigned>(rows), kThreads, 0, stream_of(call)>>>(in_of(call), out_of(call), cols);
  if (patched) g_ran = true;
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
