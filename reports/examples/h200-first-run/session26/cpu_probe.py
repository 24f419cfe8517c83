"""Why cpu/numba-tiled's back-to-back calls at 256 are slower than its sampled ones on the 16-core node: host times of
calls back to back, after a sleep, and after NumPy work (as the ledger's fresh inputs), idle and beside 16 busy
processes."""
import sys
import time

import numba
import numpy as np

from kernels.cpu import numba_tiled

built = numba_tiled.build("fp32", {"tile_m": 64, "tile_n": 256, "tile_k": 128}, None)
rng = np.random.default_rng(0)
a, b = rng.random((256, 256), dtype=np.float32), rng.random((256, 256), dtype=np.float32)
c = np.empty((256, 256), np.float32)


def run():
    numba_tiled.run(built.artifact, a, b, c, None)


def timed(between, count=30):
    out = []
    for _ in range(count):
        between()
        start = time.perf_counter()
        run()
        out.append(time.perf_counter() - start)
    return f"min {min(out) * 1e3:.2f} median {np.median(out) * 1e3:.2f} ms"


for _ in range(5):
    run()
print(sys.argv[1], "layer", numba.threading_layer(), "threads", numba.get_num_threads(), flush=True)
print("  back to back     ", timed(lambda: None))
print("  after 3 ms sleep ", timed(lambda: time.sleep(0.003)))
print("  after NumPy work ", timed(lambda: rng.random((3, 256, 256), dtype=np.float32)))
print("  after 1 ms spin  ", timed(lambda: [0 for _ in range(20000)]))
