extern "C" __global__ void block_stream(const volatile int* release, volatile int* timed_out,
                                        unsigned long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (!release[0]) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) { timed_out[0] = 1; return; }
    }
}
