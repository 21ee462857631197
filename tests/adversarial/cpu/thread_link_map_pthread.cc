// CHEAT (class 5, static-check dodge; spelling: pthread_create found by
// walking the link map by hand). The names pthread_create / pthread_join are
// only strings (blanked by the static check) looked up through
// dl_iterate_phdr and each object's GNU hash table (no dlsym import). Each
// call hands the second half of the rows to a helper thread and joins it
// before returning: results are right and no thread outlives the call, so
// today's thread count sees nothing -- "accepted" (on two idle cores up to
// 2x "faster" than the single-threaded kernel the ABI asks for).
// Expected (new worker): "forbidden" -- a thread started during the call
// (clone refused by the runner's seccomp filter).
#include <elf.h>
#include <link.h>
#include <pthread.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "forge_kernel.h"

namespace {
// A symbol's address by name, found by hand: dl_iterate_phdr, each loaded
// object's dynamic section, its GNU hash table and symbol table (no dlsym).
uint32_t gnu_hash(const char* s) {
  uint32_t h = 5381;
  for (; *s; ++s) h = h * 33 + static_cast<unsigned char>(*s);
  return h;
}

struct Lookup {
  const char* name;
  void* found;
};

int visit(dl_phdr_info* info, size_t, void* arg) {
  Lookup* q = static_cast<Lookup*>(arg);
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 0;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const uint32_t* gnu = nullptr;
  auto addr = [&](ElfW(Addr) p) { return p < info->dlpi_addr ? p + info->dlpi_addr : p; };
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    if (dyn->d_tag == DT_SYMTAB) symtab = reinterpret_cast<const ElfW(Sym)*>(addr(dyn->d_un.d_ptr));
    if (dyn->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(addr(dyn->d_un.d_ptr));
    if (dyn->d_tag == DT_GNU_HASH) gnu = reinterpret_cast<const uint32_t*>(addr(dyn->d_un.d_ptr));
  }
  if (!symtab || !strtab || !gnu) return 0;
  const uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_size = gnu[2];
  const uint32_t* buckets = gnu + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
  const uint32_t* chain = buckets + nbuckets;
  const uint32_t h = gnu_hash(q->name);
  uint32_t i = buckets[h % nbuckets];
  if (i < symoffset) return 0;
  for (;; ++i) {
    const uint32_t h2 = chain[i - symoffset];
    const ElfW(Sym)& s = symtab[i];
    if ((h2 | 1) == (h | 1) && s.st_shndx != SHN_UNDEF && s.st_value != 0 &&
        ELF64_ST_TYPE(s.st_info) == STT_FUNC && std::strcmp(strtab + s.st_name, q->name) == 0) {
      q->found = reinterpret_cast<void*>(info->dlpi_addr + s.st_value);
      return 1;
    }
    if (h2 & 1) break;
  }
  return 0;
}

void* find_symbol(const char* name) {
  Lookup q{name, nullptr};
  dl_iterate_phdr(visit, &q);
  return q.found;
}
}  // namespace

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
struct Half {
  const float* in;
  float* out;
  int64_t rows, cols;
};

void* run_half(void* arg) {
  Half* h = static_cast<Half*>(arg);
  softmax_rows(h->in, h->out, h->rows, h->cols);
  return nullptr;
}

using Start = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
using Join = int (*)(pthread_t, void**);
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
  static const Start start = reinterpret_cast<Start>(find_symbol("pthread_create"));
  static const Join join = reinterpret_cast<Join>(find_symbol("pthread_join"));
  const int64_t first = rows / 2;
  Half second{in + first * cols, out + first * cols, rows - first, cols};
  pthread_t helper;
  if (!start || !join || first == 0 || start(&helper, nullptr, run_half, &second) != 0) {
    softmax_rows(in, out, rows, cols);
    return 0;
  }
  softmax_rows(in, out, first, cols);
  join(helper, nullptr);
  return 0;
}
