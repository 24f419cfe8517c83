"""Generate TVM 05 variants' CUDA source (dev)."""
import json, sys, time, importlib
from kernels.tvm import variants
target = variants.cuda_target("sm_90")
def gen(modname, params, n, tag, pass_config=None):
    R = importlib.import_module(modname)
    p = {**R.DEFAULTS, **params}
    import tvm
    sch = R.schedule(variants.matmul(n, n, n), p, target, True)
    cfg = dict(variants.PASS_CONFIG, **(pass_config or {}))
    with tvm.transform.PassContext(config=cfg):
        src = str(tvm.compile(sch.mod, target=target).mod.imports[0].inspect_source())
    grid, block = variants.launch_dims(sch)
    dyn = 0
    if "extern __shared__" in src:
        from tvm import s_tir, tirx
        with tvm.transform.PassContext(config=cfg):
            lowered = tirx.get_default_tir_pipeline(target)[0](tirx.transform.BindTarget(target)(sch.mod))
        dyn = int(s_tir.analysis.calculate_allocated_bytes(lowered)["main"].get("shared.dyn", 0))
    return {"tag": tag, "params": params, "n": n, "source": src, "grid": grid, "block": block, "dyn": dyn,
            "name": variants.kernel_name(src)}
if __name__ == "__main__":
    k = gen("kernels.tvm.05_recipe" if False else "kernels.tvm.05_recipe".replace("05_recipe","05_recipe"), dict(BM=128,BN=128,BK=8,STAGES=3,GROUP=8), 4096, "base")
    open(".dev/tvm05/base.cu","w").write(k["source"])
