"""Whether a point was timed while compiles ran on the CPU beside it: for each point both runs measured with the same
parameters (m >= 1024), the CPU jobs (build, tune_compile, tune_check_compile, tune_code) running at its
`measured_at` in each run, from the Snakemake log's job starts and ends; then the differences by whether the
first run's, the default run's, both or neither's host was busy.
Usage: python busy_host.py FIRST/summary.csv FIRST.log DEFAULT/summary.csv DEFAULT.log"""
import datetime
import re
import sys

import pandas as pd

from gemmbench.present import tables

CPU_RULES = {"build", "tune_compile", "tune_check_compile", "tune_code"}


def cpu_windows(log: str) -> list[tuple]:
    """(start, end) of each CPU job in a Snakemake log, as UTC datetimes."""
    started, ends, stamp, rule = {}, {}, None, None
    for line in open(log).read().splitlines():
        if found := re.match(r"\[(\w+ \w+ +\d+ [\d:]+ \d+)\]", line):
            stamp = datetime.datetime.strptime(found.group(1), "%a %b %d %H:%M:%S %Y").replace(tzinfo=datetime.UTC)
        elif found := re.match(r"\s*(?:local)?rule (\w+):", line):
            rule = found.group(1)
        elif (found := re.match(r"\s*jobid: (\d+)", line)) and rule in CPU_RULES:
            started[found.group(1)] = stamp
        elif found := re.match(r"Finished jobid: (\d+)", line):
            ends[found.group(1)] = stamp
    return [(start, ends[job]) for job, start in started.items() if job in ends]


def busy(summary: pd.DataFrame, log: str) -> pd.Series:
    windows = cpu_windows(log)
    at = pd.to_datetime(summary.measured_at)
    return at.map(lambda t: sum(start <= t <= end for start, end in windows))


first, default = pd.read_csv(sys.argv[1]), pd.read_csv(sys.argv[3])
first["busy"], default["busy"] = busy(first, sys.argv[2]), busy(default, sys.argv[4])
keys = ["workload", "family", "variant", "mode", "m", "n", "k", "k0", "n0", "n1"]
both = tables.compare(default, first, min_size=0)
both = both[both.m >= 1024]  # b2b shapes too (min_size reads n and k, which they leave empty)
for frame in (first, default, both):  # the b2b shapes' extra sizes, one dtype in all three
    frame[["k0", "n0", "n1"]] = frame[["k0", "n0", "n1"]].astype("float64")
both = both.merge(first[keys + ["params", "busy"]], on=keys).merge(
    default[keys + ["params", "busy"]], on=keys, suffixes=("_first", "_default"))
both = both[both.params_first.fillna("") == both.params_default.fillna("")]
both = both[both.family != "cpu"]
both["host"] = both.apply(lambda r: {(True, True): "both busy", (True, False): "first run's busy",
                                     (False, True): "default run's busy", (False, False): "neither busy"}[
    (r.busy_first > 0, r.busy_default > 0)], axis=1)
summary = both.groupby("host").diff_pct.agg(points="size", median="median",
                                            within_2pct=lambda d: (d.abs() <= 2).mean() * 100)
print("The first run over the default run, the GPU points with the same parameters, by whose host was busy:")
print(summary.to_string(float_format=lambda x: f"{x:+.2f}"))
print()
print("The points beyond 2%:")
print(both[both.diff_pct.abs() > 2][["family", "variant", "mode", "m", "n", "k", "k0", "diff_pct", "busy_first",
                                     "busy_default"]].to_string(index=False))
