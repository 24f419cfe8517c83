import sys, re, importlib, traceback
sys.path.insert(0, ".dev/tvm05")
import gen, r05
from kernels.tvm import variants
import tvm
def build(stages, order, params, n=4096):
    orig = r05.schedule
    def patched(func, p, target, bind=True):
        sch = orig(func, p, target, bind)
        return sch
    # monkeypatch annotate values via a wrapper on Schedule.annotate
    from tvm import s_tir
    real = s_tir.Schedule.annotate
    def annotate(self, loop, key, value):
        if key == "software_pipeline_stage" and len(value) == 5:
            value = stages(params["STAGES"])
        if key == "software_pipeline_order" and len(value) == 5:
            value = order
        return real(self, loop, key, value)
    s_tir.Schedule.annotate = annotate
    try:
        return gen.gen("r05", params, n, "x")
    finally:
        s_tir.Schedule.annotate = real
P = dict(BM=128, BN=128, BK=8, STAGES=3, GROUP=8)
for name, stages, order in [
        ("base", lambda S: [0, 0, S-1, S-1, S-1], [0, 1, 2, 3, 4]),
        ("copies-after-prologue", lambda S: [0, 0, S-1, S-1, S-1], [1, 2, 0, 3, 4]),
        ("prefetch-next", lambda S: [0, 0, S-2, S-1, S-1], [0, 1, 3, 2, 4]),
        ("prefetch-next-copies-late", lambda S: [0, 0, S-2, S-1, S-1], [2, 3, 0, 1, 4]),
]:
    try:
        k = build(stages, order, P)
    except Exception as e:
        print(name, "FAILED", str(e).splitlines()[-1][:300]); continue
    src = k["source"]
    open(f".dev/tvm05/{name}.cu", "w").write(src)
    body = src[src.index("for (int ax7_0"):] if "for (int ax7_0" in src else src
    print(name, "syncs total", src.count("__syncthreads"), "waits", re.findall(r"wait_group_(\d)\(\)", src)[:6],
          "local decls", re.findall(r"float (\w+_local\[\d+\])", src))
