#include "candidate.h"

#include <elf.h>


#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>
#include <vector>

namespace forge::worker {
namespace {

// Libraries that would compute the op for the candidate.
constexpr const char* kLibraryPrefixes[] = {
    "libtorch",  "libc10",    "libcaffe2", "libshm",     "libcublas", "libcudnn", "libcufft",
    "libcurand", "libcusparse", "libcusolver", "libnccl", "libpython", "libnvrtc", "libmkl",
    "libopenblas", "libblas", "liblapack", "libdnnl",
};
// Thread pools that outlive the call.
constexpr const char* kThreadPoolPrefixes[] = {"libgomp", "libomp", "libiomp", "libtbb"};

constexpr const char* kLibraryCallSymbols[] = {"dlopen", "dlmopen", "dlsym", "dlvsym"};
constexpr const char* kForbiddenSymbols[] = {
    // processes
    "fork", "vfork", "execv", "execve", "execvp", "execvpe", "execl", "execlp", "execle", "system",
    "popen", "posix_spawn", "posix_spawnp", "kill", "raise",
    // files, network, environment
    "fopen", "fopen64", "freopen", "open", "open64", "openat", "openat64", "creat", "socket",
    "connect", "getenv", "secure_getenv", "setenv", "putenv", "environ", "__environ", "_environ",
    // threads (CPU kernels compute on the calling thread; CUDA ones on the device)
    "pthread_create", "thrd_create", "clone", "clone3",
    // looking at or patching the process: the loaded objects, code, the
    // auxiliary vector, raw system calls (how a kernel tells the verifier's
    // process from the user's, or rewrites the timer)
    "dl_iterate_phdr", "dladdr", "dladdr1", "dlinfo", "_r_debug", "getauxval", "mprotect", "pkey_mprotect",
    "syscall", "ptrace", "process_vm_readv", "process_vm_writev",
    // streams, device memory, device state (CUDA runtime and driver)
    "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority", "cuStreamCreate",
    "cuStreamCreateWithPriority", "cudaMalloc", "cudaMallocAsync", "cudaMallocManaged",
    "cudaMallocHost", "cudaHostAlloc", "cudaMallocPitch", "cudaMalloc3D", "cudaMallocArray",
    "cudaMallocFromPoolAsync", "cudaFree", "cudaFreeAsync", "cuMemAlloc", "cuMemAlloc_v2",
    "cuMemAllocAsync", "cuMemAllocManaged", "cuMemCreate", "cudaDeviceReset", "cudaSetDevice",
    "cudaDeviceSetLimit", "cudaDeviceSetCacheConfig", "cudaEventCreate", "cudaEventRecord",
    "cudaEventElapsedTime", "cudaProfilerStart", "cudaProfilerStop",
    // the driver API's functions by name (streams, allocations, anything)
    "cudaGetDriverEntryPoint", "cudaGetDriverEntryPointByVersion", "cuGetProcAddress", "cuGetProcAddress_v2"};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Bounds-checked view of the file.
struct Image {
  std::vector<char> bytes;
  template <typename T>
  const T* at(uint64_t off, uint64_t count = 1) const {
    if (off > bytes.size() || count > (bytes.size() - off) / sizeof(T)) return nullptr;
    return reinterpret_cast<const T*>(bytes.data() + off);
  }
  std::string_view str(uint64_t table_off, uint64_t table_size, uint64_t idx) const {
    if (idx >= table_size || table_off > bytes.size() || table_size > bytes.size() - table_off) return {};
    const char* p = bytes.data() + table_off + idx;
    size_t max = table_size - idx;
    size_t n = strnlen(p, max);
    if (n == max) return {};
    return std::string_view(p, n);
  }
};

}  // namespace

std::optional<Refusal> check_imports(const std::string& path) {
  Image img;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Refusal{"bad_candidate", "cannot read " + path};
    img.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const auto* eh = img.at<Elf64_Ehdr>(0);
  if (!eh || std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_ident[EI_DATA] != ELFDATA2LSB)
    return Refusal{"bad_candidate", "not an ELF64 little-endian file: " + path};
  if (eh->e_type != ET_DYN) return Refusal{"bad_candidate", "not a shared object: " + path};
  if (eh->e_shentsize != sizeof(Elf64_Shdr)) return Refusal{"bad_candidate", "malformed ELF section table"};
  const auto* sh = img.at<Elf64_Shdr>(eh->e_shoff, eh->e_shnum);
  if (!sh) return Refusal{"bad_candidate", "malformed ELF section table"};

  for (int i = 0; i < eh->e_shnum; ++i) {
    const Elf64_Shdr& s = sh[i];
    if (s.sh_type != SHT_DYNAMIC && s.sh_type != SHT_DYNSYM) continue;
    if (s.sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr& strtab = sh[s.sh_link];
    if (s.sh_type == SHT_DYNAMIC) {
      const auto* dyn = img.at<Elf64_Dyn>(s.sh_offset, s.sh_size / sizeof(Elf64_Dyn));
      if (!dyn) continue;
      for (uint64_t k = 0; k < s.sh_size / sizeof(Elf64_Dyn) && dyn[k].d_tag != DT_NULL; ++k) {
        if (dyn[k].d_tag != DT_NEEDED) continue;
        std::string_view lib = img.str(strtab.sh_offset, strtab.sh_size, dyn[k].d_un.d_val);
        for (const char* p : kLibraryPrefixes)
          if (starts_with(lib, p))
            return Refusal{"library_call", "the candidate links " + std::string(lib)};
        for (const char* p : kThreadPoolPrefixes)
          if (starts_with(lib, p))
            return Refusal{"bad_candidate",
                           "the candidate links " + std::string(lib) + " (a thread pool that outlives the call)"};
      }
    } else {
      const auto* sym = img.at<Elf64_Sym>(s.sh_offset, s.sh_size / sizeof(Elf64_Sym));
      if (!sym) continue;
      for (uint64_t k = 0; k < s.sh_size / sizeof(Elf64_Sym); ++k) {
        if (sym[k].st_shndx != SHN_UNDEF || sym[k].st_name == 0) continue;
        std::string_view name = img.str(strtab.sh_offset, strtab.sh_size, sym[k].st_name);
        for (const char* f : kLibraryCallSymbols)
          if (name == f) return Refusal{"library_call", "the candidate imports " + std::string(name)};
        for (const char* f : kForbiddenSymbols)
          if (name == f) return Refusal{"bad_candidate", "the candidate imports " + std::string(name)};
      }
    }
  }
  return std::nullopt;
}

}  // namespace forge::worker
