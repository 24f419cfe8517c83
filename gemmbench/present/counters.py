"""The report's profile section: Nsight Compute's counters of each rung beside the rung before it, and of each
variant beside the baseline at the same shape."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

from gemmbench.present.analysis import skipped
from gemmbench.present.axes import readable
from gemmbench.present.formatting import data_uri
from gemmbench.workloads import SHAPE_COLUMNS, shape_text

# The counters the profile section lists per rung: (column, header, format); "·" where the launch has none
PROFILE_COLUMNS = [
    ("duration_s", "ms", lambda v: f"{1e3 * v:.3g}"), ("registers", "registers", "{:.0f}".format),
    ("achieved_occupancy_pct", "occupancy %", "{:.0f}".format), ("ipc", "IPC", "{:.2f}".format),
    ("sm_throughput_pct", "SM %", "{:.0f}".format), ("memory_throughput_pct", "memory %", "{:.0f}".format),
    ("fma_pipe_instructions", "FMA-pipe inst", readable), ("hmma_instructions", "HMMA", readable),
    ("gmma_instructions", "HGMMA", readable), ("lds_bytes_per_instruction", "LDS B/inst", "{:.0f}".format),
    ("bank_conflicts_ld", "bank conflicts", readable), ("dram_read_bytes", "DRAM read MB", lambda v: readable(v / 1e6)),
    ("l2_hit_pct", "L2 hit %", "{:.0f}".format),
]

# what "against the rung before" names: counters that moved by more than a fifth, in this order
CHANGED = ["registers", "achieved_occupancy_pct", "ipc", "lds_bytes_per_instruction", "bank_conflicts_ld",
           "fma_pipe_instructions", "hmma_instructions", "gmma_instructions", "dram_read_bytes", "l2_hit_pct"]


def profile_sections(summary: pd.DataFrame, profile: pd.DataFrame) -> dict:
    """Per GPU, family, mode and profiled size: each rung's counters beside its TFLOP/s, what changed against the
    rung before it, the top stall; the stall figure; and the shapes without counters, by reason."""
    from gemmbench.present.plots import profile_stalls, save

    profile = profile.copy()
    ok = profile[profile["status"] == "ok"]
    speed = summary[summary["status"] == "ok"].set_index(["gpu", "family", "variant", "mode", *SHAPE_COLUMNS])["tflops"]
    tables = []
    groups = sorted(ok.groupby(["gpu", "workload", "family", "mode", "size"]), key=lambda g: (g[0][1] != "gemm", g[0]))
    for (gpu, workload, family, mode, size), rows in groups:
        lines, before = [], None
        shapes = rows.assign(shape=[shape_text(r) for r in rows.itertuples()])
        several = shapes["shape"].nunique() > 1  # b2b: every grid shape at that m, each named
        for r in shapes.sort_values(["variant", "shape", "kernel"], kind="stable").itertuples():
            key = (gpu, family, r.variant, mode, *(getattr(r, c) for c in SHAPE_COLUMNS))
            tflops = speed.get(key) if key in speed.index else None
            cells = [profile_cell(getattr(r, column, None), show) for column, _, show in PROFILE_COLUMNS]
            share = getattr(r, f"stall_{r.top_stall}", None) if isinstance(r.top_stall, str) else None
            lines.append({"variant": f"{r.variant} {r.shape}" if several else r.variant, "kernel": str(r.kernel)[:60],
                          "tflops": "" if tflops is None or pd.isna(tflops) else readable(tflops), "cells": cells,
                          "stall": f"{r.top_stall} ({100 * share:.0f}%)" if share is not None else "",
                          "changed": changed(before, r) if before is not None and before.variant != r.variant
                          and not several else ""})
            before = r
        tables.append({"title": f"{family} · {gpu} · {mode} · {workload} at {size}", "rows": lines})
    with tempfile.TemporaryDirectory(prefix="gemmbench-profile-") as figure_dir:
        uri = data_uri(save(profile_stalls(profile), Path(figure_dir) / "profile_stalls"), "image/png")
    return {"headers": [header for _, header, _ in PROFILE_COLUMNS], "tables": tables, "figure": uri,
            "skipped": skipped(profile, lambda r: f"{r.family}/{r.variant} {r.mode} {shape_text(r)}"),
            "failed": [f"{r.family}/{r.variant} {r.mode} {shape_text(r)}: {r.message}"
                       for r in profile[~profile["status"].isin(["ok", "skipped"])].itertuples()]}


def profile_cell(value, show) -> str:
    value = pd.to_numeric(value, errors="coerce")
    return "·" if value is None or pd.isna(value) else show(float(value))


def changed(before, now) -> str:
    """The counters that moved by more than a fifth from the rung before to this one, as 'name a → b'."""
    words = []
    for column in CHANGED:
        a, b = (pd.to_numeric(getattr(r, column, None), errors="coerce") for r in (before, now))
        if pd.isna(a) or pd.isna(b) or max(abs(a), abs(b)) == 0 or abs(b - a) <= 0.2 * max(abs(a), abs(b)):
            continue
        header, show = next((h, f) for c, h, f in PROFILE_COLUMNS if c == column)
        words.append(f"{header} {show(float(a))} → {show(float(b))}")
    if before.top_stall != now.top_stall and isinstance(now.top_stall, str):
        words.append(f"top stall {before.top_stall} → {now.top_stall}")
    return "; ".join(words[:4])
