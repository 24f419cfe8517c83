// mbarriers, shared by the rungs that hand stages over with them (13_split_barriers.cu, tensorcore/tc05_tma.cu and
// the rungs built on it). A barrier completes a phase when all its arrivals are in; a waiter names the phase by parity.
#pragma once

__device__ __forceinline__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void barrier_init(unsigned long long* barrier, int arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(arrivals));
}

__device__ __forceinline__ void barrier_arrive(unsigned long long* barrier) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier)) : "memory");
}

// Until the barrier's phase of this parity has completed.
__device__ __forceinline__ void barrier_wait(unsigned long long* barrier, int parity) {
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(shared_address(barrier)), "r"(parity)
                     : "memory");
    } while (!done);
}

// A pipeline's stages: thread 0 makes each stage's full barrier (`filled` arrivals) and empty barrier (`released`),
// fences them for the async proxy (TMA), and the block waits until they exist.
template <int STAGES>
__device__ __forceinline__ void init_stage_barriers(unsigned long long* full, unsigned long long* empty, int filled,
                                                    int released) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            barrier_init(full + s, filled);
            barrier_init(empty + s, released);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
}
