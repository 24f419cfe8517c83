"""How b2b is shown: where fusion pays (speedup over two cuBLAS calls against m), a table per GPU and mode with
each variant's time and speedup, and why a fused variant is slower than the best unfused one where it is."""
from __future__ import annotations

import pandas as pd

from gemmbench.present.axes import log2_size_axis, modes_in, placeholder, readable, throttled
from gemmbench.present.views import View
from gemmbench.workloads import OUTPUT_BYTES, shape_text


def b2b_rows(ok):
    """Benchmarked b2b points other than the cuBLAS baseline, with their speedup over it."""
    if ok.empty:
        return ok
    return ok[(ok["workload"] == "b2b") & (ok["role"] != "baseline")].dropna(subset=["speedup_vs_baseline"])


def speedup_figure(ok):
    """Where fusion pays: speedup over two cuBLAS calls against m, per k0 and mode, a line per n0×n1 and variant."""
    rows = b2b_rows(ok)
    if rows.empty:
        return placeholder("b2b: fused vs two cuBLAS calls", "no b2b point with a cuBLAS baseline in this run")
    rows = rows.assign(n0_n1=rows["n0"].astype(str) + "×" + rows["n1"].astype(str),
                       k0=rows["k0"].astype(int)).sort_values(["m", "n0", "n1"])
    import seaborn as sns  # here: the workflow reads this view when it plans, which draws nothing

    grid = sns.relplot(data=rows, x="m", y="speedup_vs_baseline", hue="n0_n1", style="series",
                       col="k0", row="mode", row_order=modes_in(rows), kind="line", marker="o",
                       height=3.2, aspect=1.15, facet_kws=dict(sharey=True))
    grid.set_titles("{row_name} · k0 = {col_name}")
    grid.set_axis_labels("m (rows of A0 and D)", "speedup over two cuBLAS calls")
    for ax in grid.axes.flat:
        log2_size_axis(ax, rows["m"].astype(float))
        ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
        ax.axhline(1.5, color="tab:green", linestyle=":", linewidth=1)
    grid.legend.set_title("n0×n1 · variant")
    grid.figure.suptitle("Where fusion pays: D = (A0·B0)·B1, time of two cuBLAS calls / the variant's time "
                         "(above 1: faster)", y=1.03)
    return grid.figure


TABLE_TEXT = {
    "anchor": "b2b", "heading": "b2b, D = (A0·B0)·B1", "shape_header": "m×k0×n0×n1",
    "intro": "Per shape m×k0×n0×n1: median device time in µs · speedup over two cuBLAS calls (cublas/b2b_unfused, "
             "same run, shape and mode). Fused variants never write the m×n0 intermediate; the unfused ones do.",
    "slower_intro": "Where a fused variant is slower than 0.9× the fastest unfused one, and why (the roofline of this "
                    "GPU: peak for the mode, measured copy bandwidth):",
}
SLOWER_THAN_UNFUSED = 0.9  # a fused variant below this speedup over the best unfused one is explained


def tables(summary, devices: list[dict]) -> list[dict]:
    """Per (gpu, mode, cache): rows = b2b shapes, columns = variants: time, and speedup over two cuBLAS calls;
    then every point where a fused variant is slower than 0.9× the best unfused one, and why."""
    ok = summary[(summary["status"] == "ok") & (summary["workload"] == "b2b")]
    bandwidth = {d["gpu_uuid"]: d.get("copy_bandwidth_gbps") for d in devices}
    found = []
    for (gpu, mode, cache), group in ok.groupby(["gpu", "mode", "cache"], sort=True):
        baselines = group[group["role"] == "baseline"]
        first = set(baselines["family"] + "/" + baselines["variant"])
        variants = sorted(group["family"] + "/" + group["variant"], key=lambda v: (v not in first, v))
        rows = {}
        for r in group.sort_values(["m", "k0", "n0", "n1"]).itertuples():
            speedup = "" if pd.isna(r.speedup_vs_baseline) else f"{r.speedup_vs_baseline:.2f}×"
            rows.setdefault(shape_text(r), {})[f"{r.family}/{r.variant}"] = {
                "time_us": f"{r.median_s * 1e6:.1f}", "speedup": speedup,
                "throttled": throttled(r)}
        fused = group["role"] == ""
        slower = group[fused & (group["speedup_vs_unfused_best"] < SLOWER_THAN_UNFUSED)].sort_values(
            ["variant", "m", "k0", "n0", "n1"])
        found.append({"title": f"b2b · {gpu} · {mode} · {cache} cache", **TABLE_TEXT,
                       "variants": list(dict.fromkeys(variants)),
                       "rows": [{"shape": shape, "cells": cells} for shape, cells in rows.items()],
                       "slower": [{"variant": f"{r.family}/{r.variant}", "shape": shape_text(r),
                                   "speedup": f"{r.speedup_vs_unfused_best:.2f}×",
                                   "why": _why_slower(r, bandwidth.get(r.gpu_uuid))}
                                  for r in slower.itertuples()]})
    return found


def _why_slower(r, bandwidth_gbps) -> str:
    """The roofline's reading of a slow fused point: was the unfused pair limited by the traffic fusion saves?"""
    unfused_bytes = r.min_bytes + 2 * OUTPUT_BYTES * r.m * r.n0  # A1 (float32) written, then read back
    intensity = r.flops / unfused_bytes
    unfused_tflops = r.tflops / r.speedup_vs_unfused_best
    if not bandwidth_gbps or pd.isna(r.peak_tflops):
        return (f"the fused kernel computes at {readable(r.tflops)} TFLOP/s, the best unfused pair at "
                f"{readable(unfused_tflops)}")
    ridge = r.peak_tflops * 1e3 / bandwidth_gbps
    if intensity >= ridge:
        return (f"compute-bound even unfused ({intensity:.0f} FLOP/byte with the intermediate, above the ridge "
                f"at {ridge:.0f}): the traffic fusion saves was not the limit, and the fused kernel computes at "
                f"{readable(r.tflops)} TFLOP/s against {readable(unfused_tflops)} for the unfused pair")
    return (f"memory-bound unfused ({intensity:.0f} FLOP/byte, below the ridge at {ridge:.0f}), but the fused "
            f"kernel moves its minimum traffic at {r.gbps:.0f} GB/s, {100 * r.gbps / bandwidth_gbps:.0f}% of the "
            f"copy bandwidth: it is bound by neither, computing at {readable(r.tflops)} TFLOP/s against "
            f"{readable(unfused_tflops)} for the unfused pair")


VIEW = View("b2b", figures=("b2b_speedup", "roofline", "validation_error"), compared=("b2b_speedup",),
            position=lambda d: d["m"], speedups=True, plots={"b2b_speedup": speedup_figure}, sections=tables)
