"""Locally (jsonschema): the validated configs of test_gpu.py's planted-fault cases, for controls.py on the node."""
import json
import sys

sys.path.insert(0, ".")
from gemmbench import configuration  # noqa: E402
from tests.timings import TIMINGS  # noqa: E402

NOT = "its output is not the product of its inputs"
cases = []
for control in [("cupy/planted-other-stream", "bench", ["does not run on the harness's stream"]),
                ("cupy/planted-rare-race", "bench", [NOT])]:
    cases.append((*control, "config"))
for timing in TIMINGS:
    for control in [("cupy/planted-skips-once-warm", "bench", [NOT]), ("cupy/planted-half-once-warm", "bench", [NOT]),
                    ("cupy/planted-pointer-cache", "bench", [NOT]), ("cupy/planted-rare-swap", "bench", [NOT]),
                    ("cupy/planted-later-launch", "bench", [NOT]),
                    ("cupy/planted-side-after-event", "bench", [NOT, "does not run on the harness's stream"])]:
        cases.append((*control, timing))
out = []
for variant, stage, says, timing in cases:
    cfg = configuration.validate({"device": "cuda", "families": ["cupy"], "variants": [variant], "modes": ["fp32"],
                                  "square_sizes": [1024], "validation_shapes": [],
                                  "variant_modules": ["tests.planted_gpu"], "timing": TIMINGS[timing]})
    out.append({"kind": "fault", "variant": variant, "stage": stage, "says": says, "timing": timing, "config": cfg})
for timing in TIMINGS:
    for cheat in ["cupy/planted-unobserved", "cupy/planted-content-cache"]:
        cfgs = {v: configuration.validate({"device": "cuda", "families": ["cupy", "cublas"], "variants": [v],
                                           "modes": ["fp32"], "square_sizes": [1024], "validation_shapes": [],
                                           "variant_modules": ["tests.planted_gpu"], "timing": TIMINGS[timing]})
                for v in (cheat, "cublas/gemm")}
        out.append({"kind": "cannot-hit", "variant": cheat, "timing": timing, "configs": cfgs})
json.dump(out, open(".dev/s27/controls.json", "w"), default=list)
print(len(out), "cases")
