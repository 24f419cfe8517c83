"""The first run's points (parameters from its own searches) against the default run's (the committed records, made
by full searches), same H100, same sitting, m >= 1024: first over default minus one, split by whether the two used
the same parameters at that point (then the difference is the run-to-run band) or not (then it is the searches').
Usage: python first_vs_default.py FIRST/summary.csv DEFAULT/summary.csv"""
import sys

import pandas as pd

from gemmbench.present import analysis, tables

first, default = (pd.read_csv(path) for path in sys.argv[1:3])
both = tables.compare(default, first, min_size=0)
both = both[both.m >= 1024]  # b2b shapes too (min_size reads n and k, which they leave empty)
keys = ["workload", "family", "variant", "mode", "m", "n", "k", "k0", "n0", "n1"]
params = [frame[keys + ["params", "tuning"]].fillna({"tuning": "untuned"}) for frame in (first, default)]
both = both.merge(params[0], on=keys, how="left").merge(params[1], on=keys, how="left", suffixes=("", "_default"))
both["same_params"] = both.params.fillna("") == both.params_default.fillna("")  # as `shared` below
both = both[~both.family.isin(["cublas", "cpu"])]
for same, part in both.groupby("same_params"):
    within = (part.diff_pct.abs() <= 2).sum()
    print(f"{'same' if same else 'other'} parameters: {len(part)} points, {within} ({100 * within / len(part):.1f}%) "
          f"within 2%, median |difference| {part.diff_pct.abs().median():.2f}%, median difference "
          f"{part.diff_pct.median():+.2f}%")
print()
print("Points with other parameters beyond 2% (positive: the first run's pick is slower):")
other = both[~both.same_params & (both.diff_pct.abs() > 2)].sort_values("diff_pct")
print(other[["family", "variant", "mode", "m", "diff_pct", "params", "params_default"]]
      .to_string(index=False, formatters={"diff_pct": "{:+.1f}".format}))
print()
per_variant = both.groupby(["family", "variant", "mode"]).agg(
    points=("diff_pct", "size"), same_params=("same_params", "sum"), median_diff_pct=("diff_pct", "median"),
    worst_diff_pct=("diff_pct", "max"), default_tuning=("tuning_default", lambda t: t.iloc[0].split(" ")[0]))
print("Per variant and mode (the default run's tuning: committed, or transferred from the H200's records):")
print(per_variant.to_string(float_format=lambda x: f"{x:+.1f}"))
print()
# Every point (cuBLAS and the CPU's included) whose parameters the two runs share, as the report's comparison
# section reads two runs: how far two runs of one kernel agree on this GPU, the first run's beside its searches.
keys_params = default[keys + ["params"]].rename(columns={"params": "params_default"})
shared = first.merge(keys_params, on=keys, how="left")
shared = shared[shared.params.fillna("") == shared.params_default.fillna("")].drop(columns="params_default")
found = analysis.comparison(shared, "default run", default)
print("The points whose parameters the two runs share (analysis.comparison, the first run against the default run):")
print(found["text"])
print(found["agreement"])
for point in found["outside"]:
    print(f"  {point['diff']:>7}  {point['point']}: {point['reason']}")
