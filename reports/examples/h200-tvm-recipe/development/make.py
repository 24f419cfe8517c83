import sys, json, time
sys.path.insert(0, ".dev/tvm05")
import gen, events
NOSR = {"tirx.disable_storage_rewrite": True}
PRE = lambda S: dict(KO_STAGES=[0, 0, S - 2, S - 1, S - 1], KO_ORDER=[0, 1, 3, 2, 4])
SPLIT = lambda S: dict(KO_STAGES=[0, 0, S - 2, S - 1, S - 1], KO_ORDER=[0, 4, 2, 1, 3])
LATE = lambda S: dict(KO_STAGES=[0, 0, S - 1, S - 1, S - 1], KO_ORDER=[3, 4, 0, 1, 2])
T8 = dict(BM=128, BN=128, BK=8, GROUP=8)
T16 = dict(BM=128, BN=128, BK=16, GROUP=4)
W16 = dict(BM=128, BN=256, BK=16, GROUP=8, DYN=1)
W = dict(BM=128, BN=256, BK=16, GROUP=8)
H = dict(BM=256, BN=128, BK=16, GROUP=8)
C = [
    ("base", {**T16, "STAGES": 2}, {}),
    ("vecb", {**T16, "STAGES": 2, "VEC_B": 1}, NOSR),
    ("vecb-g8", {**T16, "STAGES": 2, "VEC_B": 1, "GROUP": 8}, NOSR),
    ("vecb", {**T16, "STAGES": 3, "VEC_B": 1, "DYN": 1}, NOSR),
    ("vecb-pre", {**T16, "STAGES": 3, "VEC_B": 1, "DYN": 1, **PRE(3)}, NOSR),
    ("vecb-split", {**T16, "STAGES": 3, "VEC_B": 1, "DYN": 1, **SPLIT(3)}, NOSR),
    ("vecb", {**W, "STAGES": 3, "VEC_B": 1, "DYN": 1}, NOSR),
    ("vecb-pre", {**W, "STAGES": 3, "VEC_B": 1, "DYN": 1, **PRE(3)}, NOSR),
    ("vecb", {**H, "STAGES": 3, "VEC_B": 1, "DYN": 1}, NOSR),
    ("vecb-pre", {**H, "STAGES": 3, "VEC_B": 1, "DYN": 1, **PRE(3)}, NOSR),
    ("vecb", {**T8, "STAGES": 3, "VEC_B": 1}, NOSR),
    ("vecb-split", {**T8, "STAGES": 4, "VEC_B": 1, **SPLIT(4)}, NOSR),
    ("vecb", {**T8, "BM": 256, "STAGES": 3, "VEC_B": 1}, NOSR),
]
out = []
for tag, params, cfg in C:
    for n in (4096, 8192):
        t = time.time()
        try:
            k = gen.gen("r05", params, n, tag, cfg)
        except Exception as e:
            print(tag, params, "FAIL", str(e).splitlines()[-1][:200]); break
        k["events"] = events.events(k["source"])
        out.append(k)
        if n == 4096:
            print(f"{tag:14s} {json.dumps({x: y for x, y in params.items() if not x.startswith('KO')})} dyn={k['dyn']} "
                  f"{time.time() - t:.1f}s :: {k['events'][:150]}", flush=True)
json.dump(out, open(".dev/tvm05/kernels.json", "w"))
print(len(out), "kernels")
