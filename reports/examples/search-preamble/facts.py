"""The toolchain and GPU facts as the job finds them in-process, against the resident worker's (device_facts), with
the time each took, in a fresh process."""
import time

t0 = time.perf_counter()
from gemmbench import configuration  # noqa: E402
from gemmbench.measure import provenance  # noqa: E402
from gemmbench.run import supervise  # noqa: E402
from gemmbench.run.task import Task  # noqa: E402
from gemmbench.stages.common import variant_of  # noqa: E402
from gemmbench.tuning import records  # noqa: E402
import yaml  # noqa: E402

config = configuration.validate(yaml.safe_load(open("config/config.yaml")))
variant = variant_of(config, "cupy/03_smem_tiles")
task = Task.of("tune", config, variant, "fp32", [])
t1 = time.perf_counter()
for i in range(2):
    s = time.perf_counter()
    device = supervise.device_facts(task, 600)
    print(f"worker's facts ({'start' if i == 0 else 'resident'}): {time.perf_counter() - s:.2f} s")
s = time.perf_counter()
own = provenance.toolchain()
print(f"this process's toolchain: {time.perf_counter() - s:.2f} s")
s = time.perf_counter()
gpu = records._own_gpu()
print(f"this process's GPU facts: {time.perf_counter() - s:.2f} s")
print("imports", round(t1 - t0, 2))
print("compilers equal:", records.relevant(None, own) == records.relevant(None, device["versions"]))
print("own:", records.relevant(None, own))
print("worker's:", records.relevant(None, device["versions"]))
print("gpu equal:", gpu == {k: device[k] for k in records.KIND}, gpu)
print("toolchain differs in:", {k for k in set(own) | set(device["versions"]) if own.get(k) != device["versions"].get(k)})
