"""One self-contained HTML report: every figure, table and download is embedded in the file."""
from __future__ import annotations

import base64
import json
import math
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import jinja2
import pandas as pd

from gemmbench import workloads
from gemmbench.measure import checking
from gemmbench.measure.backend import EXPONENT_RANGE
from gemmbench.measure.timing import SETTLE_CLOCK_REL, SETTLE_MAX_S, SETTLE_WINDOW_S
from gemmbench.present import tables, views
from gemmbench.present.axes import flagged, readable, throttled
from gemmbench.present.plots import baseline_first, ladder_rows, several_models
from gemmbench.workloads import SHAPE_COLUMNS, shape_text

TEMPLATE = Path(__file__).resolve().parents[2] / "workflow/report/report.html.j2"
VALIDATION_LABELS = {"ok": "pass", "failed": "fail"}  # other statuses keep their own name
NON_OK_COLUMNS = ["gpu", "workload", "family", "variant", "mode", *SHAPE_COLUMNS, "cache", "status", "message"]
SUMMARY_COLUMNS = [*NON_OK_COLUMNS, "role", "tflops", "pct_of_baseline", "pct_of_peak", "peak_tflops", "noise",
                   "speedup_vs_baseline", "speedup_vs_unfused_best", "failures_before", "failure_history",
                   "timing_gate", "slower_than_tuning", "tuning"]


def render_report(*, summary: pd.DataFrame, validation: pd.DataFrame, builds: pd.DataFrame,
                  samples_csv: Path, summary_csv: Path, devices: list[dict],
                  figures: dict[str, Path], out_html: Path, methodology: dict,
                  compared_with: tuple[str, pd.DataFrame] | None = None,
                  profile: pd.DataFrame | None = None) -> None:
    """`figures` in reading order (the workload's view, gemmbench/present/views/); their captions are the ones
    `snakemake --report` shows (workflow/report/*.rst)."""
    # an empty table may arrive without columns (nothing ran); give it the ones read below
    summary = summary.reindex(columns=[*summary.columns, *(c for c in SUMMARY_COLUMNS if c not in summary)])
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE.parent),
                                     autoescape=True, undefined=jinja2.StrictUndefined)
    html = environment.get_template(TEMPLATE.name).render(
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        warnings=[f"{d.get('gpu', 'cpu')}: {d['device_reason']}" for d in devices
                  if d.get("device") == "cpu" and d.get("device_reason")],
        provenance=provenance(summary, devices),
        glance=_at_a_glance(summary, devices),
        glance_speedups=_at_a_glance_speedups(summary) if "workload" in summary else [],
        side_by_side=_side_by_side(summary),
        comparison=_comparison(summary, *compared_with) if compared_with else None,
        best_tables=_best_per_family(summary),
        ladders=_ladders(summary),
        profile=_profile_sections(summary, profile) if profile is not None else None,
        workload_tables=[table for view in views.VIEWS.values() if view.sections
                         for table in view.sections(summary, devices)],
        figures=[{"name": name, "caption": f"{_caption(name)} {_drawn(summary, name)}".strip(),
                  "uri": _data_uri(figures[name], "image/png")} for name in figures],
        validation=_validation_matrix(validation),
        status_counts=summary["status"].value_counts().to_dict(),
        non_ok=_table(summary.loc[~summary["status"].isin(["ok", "skipped"]), NON_OK_COLUMNS]),
        failed_before=_table(summary.loc[pd.to_numeric(summary["failures_before"], errors="coerce").fillna(0) > 0,
                                         [*NON_OK_COLUMNS, "failures_before", "failure_history"]]),
        slower_than_tuning=_table(summary.loc[pd.to_numeric(summary["slower_than_tuning"], errors="coerce") > 0,
                                              [*NON_OK_COLUMNS[:-1], "slower_than_tuning", "message"]]),
        transferred=_table(summary.loc[summary["tuning"].astype("string").fillna("").str.startswith("transferred"),
                                       ["gpu", "family", "variant", "mode", "tuning"]].drop_duplicates()),
        ungated=_table(summary.loc[summary["timing_gate"].astype("string").fillna("").str.startswith("unchecked"),
                                   [*NON_OK_COLUMNS[:-2], "timing_gate"]]),
        skipped=_skipped(summary, lambda r: f"{r.family}/{r.variant} {r.mode} {shape_text(r)}"),
        builds=_table(_readable_builds(builds)),
        build_summary=_table(_build_summary(builds)),
        devices=[{"name": _device_name(device), "facts": _flatten(_readable_device(device))} for device in devices],
        methodology=_flatten(methodology),
        downloads=[{"name": "summary.csv", "uri": _data_uri(summary_csv, "text/csv")},
                   *_samples_downloads(Path(samples_csv))],
    )
    Path(out_html).write_text(html, encoding="utf-8")


COMPILERS = {"nvrtc": "NVRTC (CuPy)", "nvidia-cuda-nvrtc": "NVRTC wheel", "nvvm": "NVVM", "numba": "Numba",
             "cupy-cuda13x": "CuPy", "cupy-cuda12x": "CuPy", "apache-tvm": "TVM", "cublas": "cuBLAS"}


def provenance(summary: pd.DataFrame, devices: list[dict]) -> list[str]:
    """The lines under the title: each device with its driver, the compilers and libraries that made the numbers,
    and the commit and sources that ran; a summary from before a column was kept leaves that part out."""
    lines = []
    for device in devices:
        facts = _readable_device(device)
        if device.get("device") == "cuda":
            cuda = f", CUDA {facts['cuda_driver']}" if facts.get("cuda_driver") else ""
            lines.append(f"{device.get('gpu', '')} ({str(device.get('gpu_uuid', ''))[:12]}), driver "
                         f"{device.get('driver', '?')}{cuda}")
        else:
            lines.append(_device_name(device))
    versions = next((d.get("versions") for d in devices if d.get("device") == "cuda" and d.get("versions")), None) \
        or next((d.get("versions") for d in devices if d.get("versions")), {})
    versions = _readable_device({"versions": versions})["versions"]
    compilers = [f"{name} {versions[key]}" for key, name in COMPILERS.items() if versions.get(key)]
    if compilers:
        lines.append("Compilers and libraries: " + ", ".join(compilers))
    if "git_commit" in summary and summary["git_commit"].notna().any():
        commits = summary["git_commit"].dropna().astype(str).str[:7].unique()
        edited = "git_dirty" in summary and summary["git_dirty"].fillna(False).astype(bool).any()
        sources = summary["source_digest"].dropna().nunique() if "source_digest" in summary else 0
        digests = f"; {sources} source digests (the harness and each variant's files, per row)" if sources else ""
        lines.append(f"Commit {', '.join(commits)}{' with edits' if edited else ''}{digests}")
    return lines


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


def _profile_sections(summary: pd.DataFrame, profile: pd.DataFrame) -> dict:
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
            cells = [_profile_cell(getattr(r, column, None), show) for column, _, show in PROFILE_COLUMNS]
            share = getattr(r, f"stall_{r.top_stall}", None) if isinstance(r.top_stall, str) else None
            lines.append({"variant": f"{r.variant} {r.shape}" if several else r.variant, "kernel": str(r.kernel)[:60],
                          "tflops": "" if tflops is None or pd.isna(tflops) else readable(tflops), "cells": cells,
                          "stall": f"{r.top_stall} ({100 * share:.0f}%)" if share is not None else "",
                          "changed": _changed(before, r) if before is not None and before.variant != r.variant
                          and not several else ""})
            before = r
        tables.append({"title": f"{family} · {gpu} · {mode} · {workload} at {size}", "rows": lines})
    with tempfile.TemporaryDirectory(prefix="gemmbench-profile-") as figure_dir:
        uri = _data_uri(save(profile_stalls(profile), Path(figure_dir) / "profile_stalls"), "image/png")
    return {"headers": [header for _, header, _ in PROFILE_COLUMNS], "tables": tables, "figure": uri,
            "skipped": _skipped(profile, lambda r: f"{r.family}/{r.variant} {r.mode} {shape_text(r)}"),
            "failed": [f"{r.family}/{r.variant} {r.mode} {shape_text(r)}: {r.message}"
                       for r in profile[~profile["status"].isin(["ok", "skipped"])].itertuples()]}


def _profile_cell(value, show) -> str:
    value = pd.to_numeric(value, errors="coerce")
    return "·" if value is None or pd.isna(value) else show(float(value))


def _changed(before, now) -> str:
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


def _drawn(summary: pd.DataFrame, name: str) -> str:
    """What this run's figure holds, in a sentence generated from the rows it draws."""
    workload, name = views.figure_of(name)
    ok = summary[(summary["status"] == "ok") & (summary["workload"] == workload)].dropna(subset=["tflops"])
    if name == "ladder":
        ok = ladder_rows(ok)
    if ok.empty:
        return ""
    families = ", ".join(f"{family} ({n} variant{'s' if n > 1 else ''})" for family, n in
                         ok.groupby("family")["variant"].nunique().items())
    devices = ", ".join(sorted(ok["gpu"].dropna().unique()))
    return (f"Here: {families}; modes {', '.join(sorted(ok['mode'].unique()))}; {len(ok)} points from "
            f"{int(ok['m'].min())} to {int(ok['m'].max())} (m) on {devices}.")


def _caption(name: str) -> str:
    path = TEMPLATE.parent / f"{views.figure_of(name)[1]}.rst"
    return " ".join(path.read_text().split()) if path.exists() else ""


EMBED_CSV_BYTES = 1 << 20  # a bigger samples table is embedded as Parquet, which keeps the report small


def _samples_downloads(samples_csv: Path) -> list[dict]:
    """The samples as Parquet (whenever it exists), and as CSV too when that is small."""
    parquet = samples_csv.with_suffix(".parquet")
    files = [{"name": "samples.parquet", "uri": _data_uri(parquet, "application/vnd.apache.parquet")}] \
        if parquet.exists() else []
    if samples_csv.exists() and (samples_csv.stat().st_size <= EMBED_CSV_BYTES or not files):
        files.append({"name": "samples.csv", "uri": _data_uri(samples_csv, "text/csv")})
    return files


def _data_uri(path: Path, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(Path(path).read_bytes()).decode('ascii')}"


def _format(value) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    return "" if value is None or value is pd.NA else str(value)


LONG_TEXT = 40  # characters: a column with longer cells wraps at a readable width, the others stay on one line


def _table(df: pd.DataFrame) -> dict:
    rows = [[_format(v) for v in row] for row in df.itertuples(index=False)]
    return {"columns": list(df.columns), "rows": rows,
            "long": [any(len(row[i]) > LONG_TEXT for row in rows) for i in range(len(df.columns))]}


def _flatten(mapping: dict, prefix: str = "") -> list[tuple[str, str]]:
    """Nested dicts become dotted keys (peak_tflops.fp32), so every fact gets one line; empty facts are left out."""
    items = []
    for key, value in mapping.items():
        if isinstance(value, dict):
            items += _flatten(value, f"{prefix}{key}.")
        elif _format(value):
            items.append((f"{prefix}{key}", _format(value)))
    return items


def _cuda_version(number) -> str:
    """CUDA's integer versions as people write them: 13000 -> 13.0 (driver, runtime)."""
    return f"{int(number) // 1000}.{int(number) % 1000 // 10}"


def _library_version(number) -> str:
    """cuBLAS's integer version: 130100 -> 13.1.0."""
    return f"{int(number) // 10000}.{int(number) % 10000 // 100}.{int(number) % 100}"


def _device_name(device: dict) -> str:
    if device.get("device") == "cuda":
        return device.get("gpu", "")
    return f"CPU: {device.get('cpu') or device.get('gpu', '')}"


def _readable_device(device: dict) -> dict:
    """A device's facts for people: versions written as releases, a CPU not called a GPU, no internal keys."""
    internal = ("device_reason", "gpu_uuid") if device.get("device") == "cpu" else ("device_reason",)
    facts = {k: v for k, v in device.items() if k not in internal}
    if device.get("device") == "cpu":
        facts.pop("gpu", None)
    for key in ("cuda_driver", "cuda_runtime"):
        if isinstance(facts.get(key), (int, float)):
            facts[key] = _cuda_version(facts[key])
    versions = dict(facts.get("versions") or {})
    if isinstance(versions.get("cublas"), (int, float)):
        versions["cublas"] = _library_version(versions["cublas"])
    facts["versions"] = versions
    for key in ("l2_bytes", "memory_bytes"):
        if isinstance(facts.get(key), (int, float)):
            facts[key.replace("_bytes", "")] = f"{facts.pop(key) / 2**20:.0f} MiB"
    return facts


def _short(value) -> str:
    """A build fact for a table cell: JSON objects as 'key=value' lists (per size class on lines of their own)."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, dict):
        if all(isinstance(v, dict) for v in value.values()):
            return "\n".join(f"{k}: {_short(v)}" for k, v in value.items())  # one line per size class
        return " ".join(f"{k}={_format(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "; ".join(_short(v) for v in value)
    return _format(value)


def _readable_builds(builds: pd.DataFrame) -> pd.DataFrame:
    """Build records for reading: per-class facts (kept in builds.csv) left out, parameters as short strings."""
    return builds.drop(columns=[c for c in ("classes", "git_dirty") if c in builds]).apply(
        lambda column: column.map(_short) if not pd.api.types.is_numeric_dtype(column) else column)


# The build facts a reader compares along a ladder, as (column, header); a family that does not report one leaves it
# empty, and a column no build has is left out.
BUILD_FACTS = [("registers", "registers"), ("local_bytes", "spills (local bytes)"), ("shared_bytes", "shared bytes"),
               ("threads", "threads"), ("sass_ffma", "FFMA"), ("sass_hmma", "HMMA"), ("sass_hgmma", "HGMMA"),
               ("sass_lds128", "LDS.128"), ("sass_lds64", "LDS.64"), ("sass_lds32", "LDS.32"),
               ("sass_hot_loop_ffma_share", "FFMA share of hot loop"), ("compile_s", "compile (s)")]


def _build_summary(builds: pd.DataFrame) -> pd.DataFrame:
    """One line per build with the facts of BUILD_FACTS, named "family/variant mode"."""
    if builds.empty:
        return pd.DataFrame()
    facts = [(column, header) for column, header in BUILD_FACTS if column in builds and builds[column].notna().any()]
    table = pd.DataFrame({"build": builds["family"] + "/" + builds["variant"] + " " + builds["mode"],
                          "status": builds["status"]})
    for column, header in facts:
        values = pd.to_numeric(builds[column], errors="coerce")
        table[header] = values.round(2) if column.endswith(("_s", "_share")) else values
    return table.sort_values("build").reset_index(drop=True)


def _skipped(frame: pd.DataFrame, label) -> list[dict]:
    """The skipped rows of `frame` grouped by their reason, each named once by `label(row)`."""
    skipped = frame[frame["status"] == "skipped"]
    return [{"reason": reason, "where": ", ".join(dict.fromkeys(label(r) for r in group.itertuples()))}
            for reason, group in skipped.groupby("message", sort=True)]


NOISY = 0.05  # a point whose samples spread more than 5% is marked noisy (CPU timings, mostly)


def _spread(r) -> str:
    """How much a point's launches vary, as nvbench reports it (noise: the samples' relative standard deviation),
    with marks on thin, unconverged and noisy points. The median's confidence interval, far narrower, is a sampling
    detail left to the methodology and the tables."""
    noise = pd.to_numeric(getattr(r, "noise", None), errors="coerce")
    if pd.isna(noise):
        return ""
    marks = [f"noise {100 * noise:.2g}%"]
    converged = getattr(r, "converged", None)
    if flagged(getattr(r, "thin_median", None)):
        marks.append("thin median (budget cut it short)")
    elif converged is not None and not pd.isna(converged) and not converged:
        marks.append("precision target not met")
    if noise > NOISY:
        marks.append("noisy")
    return " · ".join(marks)


HEADLINE_SIZE = 8192  # the size the answer names, when the sweep has it (else its largest)


def _at_a_glance(summary: pd.DataFrame, devices: list[dict]) -> list[dict]:
    """Per GPU model (or CPU), mode and cache: one generated paragraph and the best variant of each family at the
    headline size, with TFLOP/s, % of cuBLAS and % of the mode's peak."""
    ok = summary[(summary["status"] == "ok") & (summary["workload"] == "gemm")].dropna(subset=["tflops"])
    blocks = []
    if ok.empty:
        return blocks
    ok = ok.assign(on_cpu=ok["device"] != "cuda").sort_values(["on_cpu", "gpu", "mode", "cache"])
    for (_, gpu, mode, cache), group in ok.groupby(["on_cpu", "gpu", "mode", "cache"], sort=False):
        sizes = sorted(group["m"].astype(int).unique())
        size = HEADLINE_SIZE if HEADLINE_SIZE in sizes else sizes[-1]
        at = group[group["m"] == size]
        best = at.loc[at.groupby("family")["tflops"].idxmax()].sort_values("tflops", ascending=False)
        rows = [{"family": r.family, "variant": r.variant, "tflops": readable(r.tflops),
                 "pct_of_baseline": "" if pd.isna(r.pct_of_baseline) else f"{r.pct_of_baseline:.0f}%",
                 "pct_of_peak": "" if pd.isna(r.pct_of_peak) else f"{r.pct_of_peak:.0f}%",
                 "spread": _spread(r), "throttled": throttled(r)} for r in best.itertuples()]
        blocks.append({"title": f"{gpu} · {mode} · {cache} cache", "size": f"{size}×{size}×{size}",
                       "text": _answer(best, mode, size), "rows": rows})
    return blocks


def _at_a_glance_speedups(summary: pd.DataFrame) -> list[dict]:
    """For workloads measured against a baseline over many shapes (those with speedup columns, b2b): per GPU, mode
    and cache, each variant's best speedup over the baseline and how many shapes it wins."""
    ok = summary[summary["status"] == "ok"].dropna(subset=["speedup_vs_baseline"])
    blocks = []
    for (gpu, mode, cache), group in ok.groupby(["gpu", "mode", "cache"], sort=True):
        rows = []
        for (family, variant), points in group.groupby(["family", "variant"]):
            best = points.loc[points["speedup_vs_baseline"].idxmax()]
            rows.append({"variant": f"{family}/{variant}",
                         "best": f"{best.speedup_vs_baseline:.2f}× at {shape_text(best)}",
                         "wins": f"{int((points['speedup_vs_baseline'] > 1).sum())} of {len(points)}",
                         "speedup": best.speedup_vs_baseline})
        rows.sort(key=lambda r: -r["speedup"])
        top = next((r for r in rows if r["speedup"] != 1.0), rows[0])
        blocks.append({"title": f"{gpu} · {mode} · {cache} cache", "rows": rows,
                       "text": f"Against the baseline (speedup 1.00×), the best of this run is {top['variant']}: "
                               f"{top['best']}, faster at {top['wins']} shapes."})
    return blocks


def _side_by_side(summary: pd.DataFrame) -> list[dict]:
    """With several GPU models in one summary: per mode and cache, each family's best at the largest size every
    model ran, one column per model (TFLOP/s · % of that model's cuBLAS)."""
    if "device" not in summary:  # an empty summary
        return []
    ok = summary[(summary["status"] == "ok") & (summary["workload"] == "gemm") & (summary["device"] == "cuda")]
    ok = ok.dropna(subset=["tflops"])
    if ok["gpu"].nunique() < 2:
        return []
    tables = []
    for (mode, cache), group in ok.groupby(["mode", "cache"], sort=True):
        models = sorted(group["gpu"].unique())
        common = set.intersection(*(set(g["m"].astype(int)) for _, g in group.groupby("gpu")))
        if not common:
            continue
        size = HEADLINE_SIZE if HEADLINE_SIZE in common else max(common)
        at = group[group["m"] == size]
        best = at.loc[at.groupby(["family", "gpu"])["tflops"].idxmax()]
        rows = [{"family": family, "cells": {r.gpu: f"{r.variant}: {readable(r.tflops)}" + (
            "" if pd.isna(r.pct_of_baseline) else f" · {r.pct_of_baseline:.0f}%")
            + (f" ⚠ throttled ({throttled(r)})" if throttled(r) else "") for r in rows.itertuples()}}
            for family, rows in ((family, best[best["family"] == family]) for family in baseline_first(best))]
        tables.append({"title": f"{mode} · {cache} cache · {size}×{size}×{size}", "models": models, "rows": rows})
    return tables


def _comparison(summary: pd.DataFrame, name: str, other: pd.DataFrame) -> dict:
    """This run against a reference run (`name`, its summary): where the reference came from (GPU, commit,
    toolchain), the points both measured, the run-to-run band (the median |difference|), and each point that moved
    beyond its noise: more than max(2%, 3 × the band, 3 × the two runs' combined noise at that point)."""

    both = tables.compare(other, summary, min_size=0)
    source = _reference_source(other)
    if both.empty:
        return {"name": name, "source": source, "rows": [],
                "text": "The two runs have no successfully measured point in common."}
    band = float(both["diff_pct"].abs().median())
    noise = 100 * pd.concat([pd.to_numeric(both.get(f"noise_{side}"), errors="coerce")
                             for side in "ab"], axis=1).pow(2).sum(axis=1, min_count=1).pow(0.5)
    limit = noise.mul(3).fillna(0).clip(lower=max(3 * band, 2.0))
    beyond = both.assign(limit=limit)[both["diff_pct"].abs() > limit].sort_values("diff_pct")
    faster, slower = int((beyond["diff_pct"] < 0).sum()), int((beyond["diff_pct"] > 0).sum())
    text = (f"{len(both)} points both runs measured: median |difference| {band:.2f}% (the run-to-run band), largest "
            f"{both['diff_pct'].abs().max():.2f}%. Beyond their noise (at least {max(3 * band, 2.0):.2g}%): "
            f"{faster} faster and {slower} slower in this run.")
    rows = [{"point": f"{r.family}/{r.variant} {r.mode} {shape_text(r)} · {r.gpu}",
             "before_ms": f"{1e3 * r.median_s_a:.4g}", "now_ms": f"{1e3 * r.median_s_b:.4g}",
             "diff": f"{r.diff_pct:+.1f}%", "limit": f"±{r.limit:.2g}%",
             "throttled": " / ".join(w for w, flag in (("before", r.throttled_a), ("now", r.throttled_b))
                                     if flagged(flag))} for r in beyond.itertuples()]
    return {"name": name, "source": source, "text": text, "rows": rows}


def _reference_source(other: pd.DataFrame) -> str:
    """Which GPU, commit and compilers a reference summary came from, from its own rows (its GPU rows, where it has
    any)."""
    if "device" in other and other["device"].eq("cuda").any():
        other = other[other["device"] == "cuda"]

    def values(column, width=None):
        found = other[column].dropna().astype(str) if column in other else pd.Series(dtype=str)
        return ", ".join(sorted({v[:width] if width else v for v in found})) or "?"
    toolchains = other["toolchain"].dropna() if "toolchain" in other else pd.Series(dtype=str)
    versions = dict(item.split("=", 1) for item in (toolchains.iloc[0].split() if len(toolchains) else [])
                    if "=" in item)
    if str(versions.get("cublas", "")).isdigit():
        versions["cublas"] = _library_version(versions["cublas"])
    compilers = ", ".join(f"{name} {versions[key]}" for key, name in COMPILERS.items() if versions.get(key))
    return (f"{values('gpu')} ({values('gpu_uuid', 12)}), driver {values('driver')}, commit "
            f"{values('git_commit', 7)}" + (f"; {compilers}" if compilers else ""))


def _answer(best: pd.DataFrame, mode: str, size: int) -> str:
    """The paragraph on top: the baseline's share of the peak, then how close each family's best comes to it."""
    words = []
    baseline = best[best["role"] == "baseline"]
    for r in baseline.itertuples():
        peak = "" if pd.isna(r.pct_of_peak) else (f", {r.pct_of_peak:.0f}% of the {mode} peak "
                                                  f"({readable(r.peak_tflops)} TFLOP/s at the max SM clock)")
        words.append(f"At {size}×{size}×{size}, the baseline {r.family}/{r.variant} reaches {readable(r.tflops)} "
                     f"TFLOP/s{peak}.")
    others = best[(best["role"] != "baseline") & best["pct_of_baseline"].notna()]
    if not baseline.empty and not others.empty:
        top = others.sort_values("pct_of_baseline", ascending=False).iloc[0]
        words.append(f"The closest other family is {top.family}: {top.family}/{top.variant} at "
                     f"{top.pct_of_baseline:.0f}% of the baseline.")
        rest = others[others["family"] != top.family].sort_values("pct_of_baseline", ascending=False)
        if not rest.empty:
            words.append("Then " + "; ".join(f"{r.family}'s best, {r.variant}, at {r.pct_of_baseline:.0f}%"
                                             for r in rest.itertuples()) + ".")
    elif baseline.empty:  # a CPU: compared with its host's cuBLAS, if that ran
        words.append(f"At {size}×{size}×{size}: " + "; ".join(
            f"{r.family}/{r.variant} {readable(r.tflops)} TFLOP/s" + ("" if pd.isna(r.pct_of_baseline) else
                                                                f", {r.pct_of_baseline:.2g}% of its host's cuBLAS")
            for r in best.itertuples()) + ".")
    return " ".join(words)


def _window_clock(r) -> str:
    """The SM clock over the sampling window (its mean; NVML read every 10 ms), not the snapshot before it; that
    snapshot only where the window has none (an older table)."""
    for name in ("sm_clock_mean_mhz", "sm_clock_mhz"):
        value = pd.to_numeric(getattr(r, name, None), errors="coerce")
        if not pd.isna(value):
            return f"{value:.0f}"
    return ""


def _best_per_family(summary: pd.DataFrame) -> list[dict]:
    """Per (gpu, mode, cache): rows = shapes, one cell per family with its fastest variant."""
    ok = summary[(summary["status"] == "ok") & (summary["workload"] == "gemm")].dropna(subset=["tflops"])
    if ok.empty:
        return []
    best = ok.loc[ok.groupby(["gpu", "mode", "cache", "family", "m", "n", "k"])["tflops"].idxmax()]
    tables = []
    for (gpu, mode, cache), group in best.groupby(["gpu", "mode", "cache"], sort=True):
        families = baseline_first(group)
        rows = []
        for (m, n, k), shape in group.groupby(["m", "n", "k"]):
            cells = {r.family: {"variant": r.variant, "tflops": _format(r.tflops),
                                "pct": "" if pd.isna(r.pct_of_baseline) else f"{r.pct_of_baseline:.1f}",
                                "clock": _window_clock(r),
                                "peak": "" if pd.isna(r.pct_of_peak) else f"{r.pct_of_peak:.0f}",
                                "spread": _spread(r),
                                "throttled": throttled(r)}
                     for r in shape.itertuples()}
            rows.append({"size": f"{m}×{n}×{k}", "volume": m * n * k, "cells": cells})
        tables.append({"title": f"{gpu} · {mode} · {cache} cache", "families": families,
                       "rows": sorted(rows, key=lambda r: r["volume"])})
    return tables


def _ladders(summary: pd.DataFrame) -> list[dict]:
    """Per (gpu, family, mode): rows = variants in ladder order, columns = sweep sizes, TFLOP/s and % of cuBLAS."""

    rows = ladder_rows(summary[summary["status"] == "ok"].dropna(subset=["tflops"]))
    tables = []
    for (gpu, family, mode, cache), group in rows.groupby(["gpu", "family", "mode", "cache"], sort=True):
        sizes = sorted(group["m"].astype(int).unique())
        table = {}
        for r in group.sort_values("variant").itertuples():
            table.setdefault(r.variant, {})[int(r.m)] = {"tflops": _format(r.tflops), "pct": f"{r.pct_of_baseline:.1f}",
                                                         "throttled": throttled(r)}
        tables.append({"title": f"{family} · {gpu} · {mode} · {cache} cache", "sizes": sizes,
                       "rows": [{"variant": v, "cells": cells} for v, cells in table.items()]})
    return tables


def _validation_matrix(validation: pd.DataFrame) -> dict:
    """Rows 'family/variant mode' (with the model where several), columns shapes, sweep before awkward."""

    if validation.empty:
        return {"columns": [], "rows": [], "problems": [], "skipped": []}
    validation = validation.assign(named=several_models(validation))
    ordered = validation.sort_values(["shape_kind", *SHAPE_COLUMNS], key=lambda c: c.map(
        {"sweep": 0, "awkward": 1}) if c.name == "shape_kind" else c, kind="stable")
    columns = list(dict.fromkeys((shape_text(r), r.shape_kind) for r in ordered.itertuples()))
    rows, problems = {}, []
    for r in validation.sort_values(["family", "variant", "mode"]).itertuples():
        label = f"{r.family}/{r.variant} {r.mode}" + (f" · {r.gpu}" if r.named and pd.notna(r.gpu) else "")
        cell = {"status": r.status, "label": VALIDATION_LABELS.get(r.status, r.status),
                "message": _format(r.message), "rel_error": _format(r.rel_error)}
        rows.setdefault(label, {})[shape_text(r)] = cell
        if r.status not in ("ok", "skipped"):
            problems.append({"where": f"{label} @ {shape_text(r)} ({r.shape_kind})", **cell})
    return {"columns": columns, "rows": [{"label": k, "cells": v} for k, v in rows.items()],
            "problems": problems, "skipped": _skipped(validation, lambda r: f"{r.family}/{r.variant} {r.mode}")}


def methodology(config: dict, devices: list[dict]) -> dict:
    """How the numbers were made, in words, for the devices this run used (a CPU-only run gets no CUDA entries)."""
    timing, gpu = config["timing"], any(d.get("device") == "cuda" for d in devices)
    entries = {
        "FLOPs": "; ".join(f"{name}: {workloads.get(name).formula}" for name in config["workloads"])
                 + " (float32 storage, bf16 operands in the bf16 mode)",
        "Device time": ("CUDA events around one launch queued behind a spinning kernel (as nvbench does), so the "
                        "host's launch overhead is excluded; CPU variants: wall time per call") if gpu else
                       "wall time per call (a CPU run: no device timer)",
        "Host time": "median wall time of one call including launch and synchronisation, over the warm-up "
                     "launches after the first",
        "Batched time": "for kernels under 100 µs with a hot cache, also the time per launch of as many launches in a "
                        "row (between one pair of events on a GPU) as span 100 µs (batched_median_s), beside the "
                        "one-launch median that every figure and ratio uses (median_s)",
        "Sampling": f"at least {timing['warmup_runs']} warm-up launches per point, and the device kept busy for "
                    f"{timing['warmup_s']} s before sampling (clocks settle under load; one worker runs a variant's "
                    f"points back to back, so only its first point waits that long); on a GPU the warm-up goes on, in "
                    f"{SETTLE_WINDOW_S} s windows, while a power or thermal slowdown is still lowering "
                    f"the clock under this kernel's own load (until two windows' mean clocks agree within "
                    f"{SETTLE_CLOCK_REL:.0%}, at most {SETTLE_MAX_S} s; settle_s), "
                    f"then samples until the 95% "
                    f"confidence half-width of the median (never below half the timer's step) is below "
                    f"{timing['rel_precision']:.2%} of it from at least {timing['min_samples']} samples (converged) "
                    f"and "
                    f"they add up to {timing['min_time_s']} s, or until {timing['max_samples']} samples or the "
                    f"{timing['budget_s']} s budget per point (stopped_by; thin_median: the budget left fewer than "
                    f"{timing['min_samples']})",
        "Spread": "beside each number, its noise: the relative standard deviation of its samples (as nvbench reports "
                  "it), how much one launch varies; two runs of one GPU differ by more (the comparison with a "
                  "reference run shows that band); the median's 95% confidence interval (median_ci_rel in the tables) "
                  "only decides when sampling stops",
        "Cache": f"{config['cache']} (cold: the last-level cache flushed before every sample, outside the timed "
                 f"region)",
        "What was timed": "every timed launch is accounted for on content it has never seen, outside the timed "
                          "region: before each sample its inputs get fresh random content from keys the variant "
                          "cannot see (drawn from the operating system's entropy), A·(B·x) is computed in fp64 for "
                          "x of random signs, and the output is poisoned with NaN; after it C·x is compared with it "
                          "(Freivalds' test, O(n²)): every row within the mode's error bound, and the projected "
                          "relative error too. Nothing a variant can keep between launches (a product kept by "
                          "address, by content, by sign or scale) is the product of inputs it has not seen, and "
                          "work skipped or left for later leaves NaN or a wrong row. Two samples drawn at random "
                          "(reservoir sampling) are compared in full with the fp64 reference of their own inputs, "
                          "made again from their keys, and the guard bands must hold; batched samples give every "
                          "launch its own fresh inputs and poisoned output, tested alike; launches through the same "
                          "timed path follow until the point has 64 tested launches, for at most 0.5 s and no "
                          "longer than its sampling took. A point is refused if a tracing or profiling hook is "
                          "installed, the interpreter's switch interval or timer changed, or a new thread appeared "
                          "while it was timed; on a CPU, if a drawn output element was still unwritten when the "
                          "timer stopped, or its timed median is far below the host's time of a call; a variant "
                          "whose work does not run on the harness's stream, or is unfinished when that stream's "
                          "work is done, is not timed. A variant that leaves a thread or device work running after "
                          "its point, or writes the harness's fp64 references (kept with keyed digests, checked "
                          "before each use), fails, and a resident worker that a variant left otherwise than a "
                          "fresh one is replaced before the next. Every reported time "
                          "(median, fastest sample, batched) above "
                          "the device's peak, or beyond its memory for operands its L2 cannot hold, is refused; a "
                          "device with no known peak is marked unchecked (timing_gate). A point that failed in an "
                          "earlier run keeps that history (failures_before). What this costs per point: "
                          "sampling_overhead_s and check_s in the bench records",
        "Clocks": "NVML read after warm-up, every 10 ms while sampling and after it: the SM clock's mean and minimum "
                  "over the window, temperature, power and slowdown reasons; a point with a power or thermal "
                  "slowdown or a clock drop over 5% is flagged as throttled",
        "Peak": "SM count × max SM clock × FLOP per clock per SM for the mode (FP32 FFMA, or dense TF32 tensor cores); "
                "pct_of_peak_at_clock uses the window's mean SM clock instead. A CPU's peak, which only gates its "
                "times, is bounded by logical cores × FP32 lanes of its widest vector unit × 2 FMA pipes × 2 × its "
                "highest clock (cpufreq's maximum, else 6.5 GHz)",
        "% of cuBLAS": "cuBLAS median time / variant median time, same run, GPU model, shape and mode "
                       "(CPU variants: the cuBLAS of their host; b2b: two cuBLAS calls, cublas/b2b_unfused)",
        "Validation": f"inputs uniform in [-1, 1) from seed ({config['seed']}, shape), the first operand's rows "
                      f"and the last one's columns scaled by powers of two from 2^-{EXPONENT_RANGE} to "
                      f"2^{EXPONENT_RANGE}; output poisoned with NaN inside NaN guard bands; two launches; "
                      f"fp64 reference (on the GPU for GPU variants); pass if every output is written, nothing "
                      f"outside it, and the errors are those of the mode's arithmetic: the honest error of an "
                      f"element relative to its scale (the root-sum-square of its products) is one unit, 2^-24 × "
                      f"(2 + √k) in fp32 (round to nearest), 2 × 2^-11 + 2^-24 × (2 + k/8) in tf32 and 2^-24 × "
                      f"(2 + k/8) in bf16 (tensor cores truncate as they accumulate), k the reduction length; "
                      f"‖C−R‖/‖R‖ must stay within {checking.RMS_UNITS:g} units and every element within "
                      f"{checking.MAX_UNITS:g} units of its scale (error_units, max_error_units in the tables); a "
                      f"tuned variant also at an off-tile shape per size class",
        "Watchdog": f"each point runs in a supervised worker process, killed after {timing['point_timeout_s']} s",
        "Provenance": "every row names the digest of the sources that ran (source_digest: the harness and the files "
                      "that determine its variant), the git commit (and whether the tree was edited), the driver and "
                      "the toolchain (Python, the kernel libraries, cuBLAS, NVRTC, NVVM, nvcc, the CUDA toolkit) of "
                      "the worker that measured it; a new driver or toolchain rebuilds, re-validates and re-measures",
    }
    if not gpu:
        for name in ("Clocks", "% of cuBLAS"):
            entries.pop(name)
    return entries
