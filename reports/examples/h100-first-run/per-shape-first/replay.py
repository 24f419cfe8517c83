"""Snakemake's own scheduler, given this run's jobs with their measured walls (jobs.txt) as sleeps, under three
priority schemes: how long the run takes and how long the GPU waits when scheduling is all that differs. Each job
waits for the one before it of its variant-mode (search compiles, trials, checks' compiles, tune, tune_code, build,
measure); aggregate, plot and report wait for every measure job. Threads and GPUs as the workflow asks: a search's
compiles 15 of the 16 cores, a CPU variant's measure all 16, the GPU's jobs (tune_trials, a tune job that searches,
measure) gpu=1 of 1. Not modelled: the compiles' workers slowing each other, so the walls stay this run's; and each
replayed job's own start (a fraction of a second, divided by SCALE) is added to the run's.
Usage: python replay.py jobs.txt SCALE [SCHEME ...] (replay seconds per run second, e.g. 0.2; the first three schemes
unless named)"""
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCHEMES = {
    # 3f68970: a variant compiled per shape (TVM's but 07 and 08) has its jobs after the search go first.
    "per_shape_first": lambda rule, key: 2 if rule in ("tune_compile", "tune_check_compile")
    else 1 if key[0] == "tvm" and key[1] not in ("07_tirx_wgmma", "08_tirx_registers")
    and rule in ("tune_trials", "tune", "tune_code", "build") else 0,
    # fc3386b: only the compiles a search waits for go first.
    "compiles_first": lambda rule, key: 1 if rule in ("tune_compile", "tune_check_compile") else 0,
    # The tree after this run (gpu_first): the GPU's jobs, then the compiles, before the rest.
    "gpu_jobs_first": lambda rule, key: 2 if rule in ("tune_trials", "measure") and key[0] != "cpu"
    or rule == "tune" and key in searched
    else 1 if rule in ("tune_compile", "tune_check_compile") else 0,
    # gpu_jobs_first, and a GPU variant's build level with the compiles: at the run's start, the builds that feed
    # the GPU's first jobs take the cores before a search's compiles take 15 of them.
    "builds_too": lambda rule, key: SCHEMES["gpu_jobs_first"](rule, key) or int(rule == "build" and key[0] != "cpu"),
}
CHAIN = ["tune_compile", "tune_trials", "tune_check_compile", "tune", "tune_code", "build", "measure"]

jobs = []
for line in Path(sys.argv[1]).read_text().splitlines():
    rule, start, end, names = line.split(maxsplit=3) if len(line.split()) > 3 else (*line.split(), "")
    fields = dict(re.findall(r"(\w+)=([^,]+)", names))
    jobs.append((rule, float(end) - float(start), (fields.get("family"), fields.get("variant"), fields.get("mode"))))
scale = float(sys.argv[2])
searched = {key for rule, _, key in jobs if rule == "tune_compile"}  # elsewhere the tune job reuses a record: no GPU


def snakefile(priority) -> str:
    rules, done, measures = [], {}, []
    for i, (rule, wall, key) in sorted(enumerate(jobs), key=lambda job: (str(job[1][2]), CHAIN.index(job[1][0])
                                                                        if job[1][0] in CHAIN else 99)):
        if rule not in CHAIN:
            continue
        gpu = int(rule in ("tune_trials", "measure") and key[0] != "cpu" or rule == "tune" and key in searched)
        threads = 15 if rule in ("tune_compile", "tune_check_compile") else 16 if rule == "measure" and \
            key[0] == "cpu" else 1
        before = f'"{done[key]}"' if key in done else ""
        done[key] = f"out/{i}"
        measures += [done[key]] if rule == "measure" else []
        rules.append(f'rule j{i}:\n    input: {before}\n    output: "out/{i}"\n    threads: {threads}\n'
                     f'    resources: gpu={gpu}\n    priority: {priority(rule, key)}\n'
                     f'    shell: "echo {rule} {gpu} $(date +%s.%N) > {{output}}; sleep {wall * scale:.2f}; '
                     f'date +%s.%N >> {{output}}"\n')
    tail = sum(wall for rule, wall, _ in jobs if rule in ("aggregate", "plot", "report"))
    return (f'rule all:\n    input: "out/end"\n\nrule end:\n    input: {measures}\n    output: "out/end"\n'
            f'    shell: "sleep {tail * scale:.2f}; touch {{output}}"\n\n' + "\n".join(rules))


def gpu_waited(where: Path, begin: float) -> tuple[float, float]:
    """Seconds from the run's start to the GPU's first job, and between its jobs in which it held none, from the
    stamps each job wrote."""
    held = sorted(tuple(map(float, path.read_text().split()[2:4])) for path in Path(where, "out").glob("[0-9]*")
                  if path.read_text().split()[1] == "1")
    waited, busy = 0.0, held[0][0]
    for start, end in held:
        waited += max(0.0, start - busy)
        busy = max(busy, end)
    return held[0][0] - begin, waited


with tempfile.TemporaryDirectory() as root:  # the schemes side by side: the jobs sleep, so they do not compete
    runs = {}
    for name in sys.argv[3:] or list(SCHEMES)[:3]:
        priority = SCHEMES[name]
        Path(root, name).mkdir()
        Path(root, name, "Snakefile").write_text(snakefile(priority))
        runs[name] = (time.time(), subprocess.Popen(["snakemake", "--cores", "16", "--resources", "gpu=1", "--quiet",
                                                     "all"], cwd=Path(root, name), stdout=subprocess.DEVNULL))
    for name, (begin, process) in runs.items():
        assert process.wait() == 0, name
        wall = (Path(root, name, "out/end").stat().st_mtime - begin) / scale
        first, waited = gpu_waited(Path(root, name), begin)
        print(f"{name:16} run {wall:7.1f} s, the GPU's first job at {first / scale:5.1f} s, then it waited "
              f"{waited / scale:6.1f} s between its jobs")
