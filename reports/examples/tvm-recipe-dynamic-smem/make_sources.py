import json, time
from kernels.tvm import variants
R = variants.schedule_module("05_recipe.py")
target = variants.cuda_target("sm_90")
C = [dict(BM=128, BN=128, BK=8, STAGES=3, GROUP=8), dict(BM=128, BN=128, BK=16, STAGES=2, GROUP=4),
     dict(BM=128, BN=128, BK=16, STAGES=3, GROUP=8), dict(BM=128, BN=128, BK=16, STAGES=4, GROUP=8),
     dict(BM=128, BN=256, BK=16, STAGES=3, GROUP=8), dict(BM=256, BN=128, BK=16, STAGES=3, GROUP=8),
     dict(BM=128, BN=128, BK=32, STAGES=3, GROUP=8), dict(BM=128, BN=256, BK=32, STAGES=3, GROUP=16)]
out = []
for c in C:
    p = {**R.DEFAULTS, **c}
    assert R.check(p) is None, (p, R.check(p))
    for n in (4096, 8192):
        t = time.time()
        sch = variants.scheduled("05_recipe.py", p, (n, n, n), target)
        src = variants.cuda_source(sch, target)
        grid, block = variants.launch_dims(sch)
        dyn = variants.dynamic_shared_bytes(sch, target) if "buf_dyn_shmem" in src else 0
        out.append({"params": c, "n": n, "source": src, "grid": grid, "block": block, "dyn": dyn,
                    "name": variants.kernel_name(src)})
        print(c, n, dyn, f"{time.time() - t:.1f}s", flush=True)
json.dump(out, open(".dev/tvmdyn/kernels.json", "w"))
