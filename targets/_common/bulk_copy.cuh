// Hopper's bulk copy engine for 1-D ranges: global -> shared memory by
// cp.async.bulk, completing on an mbarrier (sm_90). The forms run on the H200
// in stream_group (bench/results/rejected_designs.jsonl, c3b6c05): one thread arms a stage's barrier with
// the byte count and issues the copy; every thread waits on the stage's phase.
// Sizes and both addresses must be multiples of 16 bytes.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// One arrival (the issuing thread's) completes a phase once the bytes landed.
__device__ __forceinline__ void bulk_barrier_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
}
// After every stage's init, before the barrier that publishes them.
__device__ __forceinline__ void bulk_barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  // The stage's last reads were generic-proxy loads (ordered by the caller's
  // __syncthreads); this orders them before the async proxy's write.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}
// Returns once the barrier's phase of this parity completed (the stage's bytes are visible).
__device__ __forceinline__ void bulk_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
}
