#include "sandbox.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

namespace forge::runner {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
#error "the runner's sandbox knows x86_64 and aarch64"
#endif

// System calls a kernel has no business making: files by name, new processes,
// networking, other processes, file-system changes, kernel facilities that
// reach outside the process. Everything else (memory, futexes, ioctl on the
// descriptors the CUDA driver already holds, read/write on open descriptors)
// is allowed: the driver needs it, and the runner holds nothing worth reaching
// with it (docs/WORKER.md, the threat model).
const std::vector<int>& denied() {
  static const std::vector<int> list = {
#define FORGE_DENY(name) SYS_##name,
#ifdef SYS_creat
      FORGE_DENY(creat)
#endif
#ifdef SYS_openat2
      FORGE_DENY(openat2)
#endif
      FORGE_DENY(open_by_handle_at) FORGE_DENY(name_to_handle_at)
#ifdef SYS_fork
      FORGE_DENY(fork)
#endif
#ifdef SYS_vfork
      FORGE_DENY(vfork)
#endif
      FORGE_DENY(execve) FORGE_DENY(execveat)
      FORGE_DENY(socket) FORGE_DENY(socketpair) FORGE_DENY(connect) FORGE_DENY(bind) FORGE_DENY(listen)
      FORGE_DENY(accept) FORGE_DENY(accept4)
      FORGE_DENY(ptrace) FORGE_DENY(process_vm_readv) FORGE_DENY(process_vm_writev) FORGE_DENY(kcmp)
#ifdef SYS_pidfd_open
      FORGE_DENY(pidfd_open)
#endif
#ifdef SYS_pidfd_getfd
      FORGE_DENY(pidfd_getfd)
#endif
#ifdef SYS_pidfd_send_signal
      FORGE_DENY(pidfd_send_signal)
#endif
#ifdef SYS_unlink
      FORGE_DENY(unlink) FORGE_DENY(rename) FORGE_DENY(mkdir) FORGE_DENY(rmdir) FORGE_DENY(link)
      FORGE_DENY(symlink) FORGE_DENY(chmod) FORGE_DENY(chown) FORGE_DENY(lchown) FORGE_DENY(mknod)
#endif
      FORGE_DENY(unlinkat) FORGE_DENY(renameat2) FORGE_DENY(mkdirat) FORGE_DENY(linkat)
      FORGE_DENY(symlinkat) FORGE_DENY(fchmodat) FORGE_DENY(fchownat) FORGE_DENY(mknodat)
#ifdef SYS_renameat
      FORGE_DENY(renameat)
#endif
      FORGE_DENY(truncate) FORGE_DENY(ftruncate) FORGE_DENY(fchmod) FORGE_DENY(fchown)
      FORGE_DENY(chdir) FORGE_DENY(fchdir) FORGE_DENY(chroot) FORGE_DENY(pivot_root)
      FORGE_DENY(mount) FORGE_DENY(umount2)
      FORGE_DENY(memfd_create) FORGE_DENY(userfaultfd) FORGE_DENY(perf_event_open) FORGE_DENY(bpf)
      FORGE_DENY(io_uring_setup) FORGE_DENY(io_uring_enter) FORGE_DENY(io_uring_register)
      FORGE_DENY(init_module) FORGE_DENY(finit_module) FORGE_DENY(delete_module)
      FORGE_DENY(kexec_load) FORGE_DENY(reboot) FORGE_DENY(swapon) FORGE_DENY(swapoff)
      FORGE_DENY(setns) FORGE_DENY(unshare) FORGE_DENY(setsid) FORGE_DENY(setpgid)
      FORGE_DENY(setuid) FORGE_DENY(setgid) FORGE_DENY(setreuid) FORGE_DENY(setregid)
      FORGE_DENY(setresuid) FORGE_DENY(setresgid)
      FORGE_DENY(keyctl) FORGE_DENY(add_key) FORGE_DENY(request_key)
      FORGE_DENY(quotactl) FORGE_DENY(acct) FORGE_DENY(syslog) FORGE_DENY(personality)
#ifdef SYS_inotify_init
      FORGE_DENY(inotify_init)
#endif
      FORGE_DENY(inotify_init1) FORGE_DENY(fanotify_init)
      FORGE_DENY(mq_open) FORGE_DENY(shmget) FORGE_DENY(shmat) FORGE_DENY(msgget) FORGE_DENY(semget)
#undef FORGE_DENY
  };
  return list;
}

// Signals: allowed only to this process itself (abort() raises SIGABRT on
// itself and must stay a crash, not a sandbox kill).
const std::vector<int>& self_only() {
  static const std::vector<int> list = {SYS_kill, SYS_tkill, SYS_tgkill, SYS_rt_sigqueueinfo,
                                        SYS_rt_tgsigqueueinfo};
  return list;
}

// Opening files: SYS_open's flags are its second argument, openat's its third.
struct OpenCall {
  int nr;
  int flags_arg;
};
const std::vector<OpenCall>& open_calls() {
  static const std::vector<OpenCall> list = {
#ifdef SYS_open
      {SYS_open, 1},
#endif
      {SYS_openat, 2}};
  return list;
}
// Any of these bits makes an open more than a read.
constexpr uint32_t kWriteFlags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | (O_TMPFILE & ~O_DIRECTORY);

using Prog = std::vector<sock_filter>;

void stmt(Prog& p, uint16_t code, uint32_t k) { p.push_back(BPF_STMT(code, k)); }
void jump(Prog& p, uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { p.push_back(BPF_JUMP(code, k, jt, jf)); }

constexpr uint32_t kAllow = SECCOMP_RET_ALLOW;

}  // namespace

std::string install_sandbox(const SandboxOptions& options) {
  const uint32_t kKill = options.trap ? SECCOMP_RET_TRAP : SECCOMP_RET_KILL_PROCESS;
  const uint32_t pid = static_cast<uint32_t>(::getpid());
  Prog p;
  // Another architecture's system-call table (int 0x80 on x86_64) is refused.
  stmt(p, BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  jump(p, BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0);
  stmt(p, BPF_RET | BPF_K, kKill);
  stmt(p, BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
#if defined(__x86_64__)
  // The x32 ABI's numbers alias the same calls.
  jump(p, BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1);
  stmt(p, BPF_RET | BPF_K, kKill);
#endif
  for (int nr : denied()) {
    jump(p, BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1);
    stmt(p, BPF_RET | BPF_K, kKill);
  }
  // Stage 1 must let the runner install stage 2 (more filters only narrow).
  if (!options.read_only_open) {
    jump(p, BPF_JMP | BPF_JEQ | BPF_K, SYS_seccomp, 0, 1);
    stmt(p, BPF_RET | BPF_K, kKill);
    // Stage 2: no page changes its protection and no mapping lands on
    // existing pages. The runner is linked with full RELRO, so its GOT and
    // code (and its libraries') cannot be rewritten: the timer and the reply
    // path stay the runner's own.
    for (int nr : {SYS_mprotect, SYS_pkey_mprotect}) {
      jump(p, BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1);
      stmt(p, BPF_RET | BPF_K, kKill);
    }
    struct FlagRule {
      int nr;
      int arg;
      uint32_t bits;
    };
    for (const FlagRule& r : {FlagRule{SYS_mmap, 3, MAP_FIXED | MAP_FIXED_NOREPLACE}, FlagRule{SYS_mremap, 3, MREMAP_FIXED}}) {
      jump(p, BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(r.nr), 0, 4);
      stmt(p, BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]) + 8 * r.arg);
      jump(p, BPF_JMP | BPF_JSET | BPF_K, r.bits, 0, 1);
      stmt(p, BPF_RET | BPF_K, kKill);
      stmt(p, BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));  // restore for the next test
    }
  }
  for (const OpenCall& oc : open_calls()) {
    if (!options.read_only_open) {
      jump(p, BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(oc.nr), 0, 1);
      stmt(p, BPF_RET | BPF_K, kKill);
      continue;
    }
    jump(p, BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(oc.nr), 0, 4);
    stmt(p, BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]) + 8 * oc.flags_arg);
    jump(p, BPF_JMP | BPF_JSET | BPF_K, kWriteFlags, 0, 1);
    stmt(p, BPF_RET | BPF_K, kKill);
    stmt(p, BPF_RET | BPF_K, kAllow);
  }
  // clone: threads only where allowed; clone3 hides its flags in memory, so it
  // answers ENOSYS (glibc then falls back to clone) or kills.
  jump(p, BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1);
  stmt(p, BPF_RET | BPF_K, options.allow_threads ? (SECCOMP_RET_ERRNO | ENOSYS) : kKill);
  if (options.allow_threads) {
    jump(p, BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4);
    stmt(p, BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));  // low word: the flags
    jump(p, BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1);
    stmt(p, BPF_RET | BPF_K, kAllow);
    stmt(p, BPF_RET | BPF_K, kKill);
  } else {
    jump(p, BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 1);
    stmt(p, BPF_RET | BPF_K, kKill);
  }
  // Signals to anyone but this process: the judge is its parent.
  for (int nr : self_only()) {
    jump(p, BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 5);
    stmt(p, BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));
    jump(p, BPF_JMP | BPF_JEQ | BPF_K, pid, 0, 2);
    stmt(p, BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]) + 4);  // high word 0
    jump(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0);
    stmt(p, BPF_RET | BPF_K, kKill);
    stmt(p, BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));  // restore for the next test
  }
  stmt(p, BPF_RET | BPF_K, kAllow);

  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(p.size());
  prog.filter = p.data();
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return std::string("PR_SET_NO_NEW_PRIVS: ") + std::strerror(errno);
  // TSYNC: every thread the CUDA runtime already started gets the filter too.
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
    return std::string("seccomp: ") + std::strerror(errno);
  return {};
}

}  // namespace forge::runner
