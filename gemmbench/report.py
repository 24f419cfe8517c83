"""One self-contained HTML report: every figure, table and download is embedded in the file."""
from __future__ import annotations

import base64
import math
from datetime import datetime, timezone
from pathlib import Path

import jinja2
import pandas as pd

from gemmbench import workloads
from gemmbench.workloads import SHAPE_COLUMNS
from kernels.b2b import UNFUSED_PREFIX

TEMPLATE = Path(__file__).resolve().parents[1] / "workflow/report/report.html.j2"
VALIDATION_LABELS = {"ok": "pass", "failed": "fail"}  # other statuses keep their own name
NON_OK_COLUMNS = ["gpu", "workload", "family", "variant", "mode", *SHAPE_COLUMNS, "cache", "status", "message"]
SUMMARY_COLUMNS = [*NON_OK_COLUMNS, "tflops", "pct_of_cublas", "speedup_vs_cublas", "speedup_vs_unfused_best"]


def render_report(*, summary: pd.DataFrame, validation: pd.DataFrame, builds: pd.DataFrame,
                  samples_csv: Path, summary_csv: Path, devices: list[dict],
                  figures: dict[str, Path], out_html: Path, methodology: dict) -> None:
    """`figures` in reading order (the workload's, gemmbench/workloads.py); their captions are the ones
    `snakemake --report` shows (workflow/report/*.rst)."""
    # an empty table may arrive without columns (nothing ran); give it the ones read below
    summary = summary.reindex(columns=[*summary.columns, *(c for c in SUMMARY_COLUMNS if c not in summary)])
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE.parent),
                                     autoescape=True, undefined=jinja2.StrictUndefined)
    html = environment.get_template(TEMPLATE.name).render(
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        warnings=[f"{d.get('gpu', 'cpu')}: {d['device_reason']}" for d in devices
                  if d.get("device") == "cpu" and d.get("device_reason")],
        best_tables=_best_per_family(summary),
        ladders=_ladders(summary),
        b2b_tables=_b2b_tables(summary, devices),
        figures=[{"name": name, "caption": _caption(name), "uri": _data_uri(figures[name], "image/png")}
                 for name in figures],
        validation=_validation_matrix(validation),
        status_counts=summary["status"].value_counts().to_dict(),
        non_ok=_table(summary.loc[summary["status"] != "ok", NON_OK_COLUMNS]),
        builds=_table(builds),
        devices=[{"name": device.get("gpu", ""), "facts": _flatten(device)} for device in devices],
        methodology=_flatten(methodology),
        downloads=[{"name": "summary.csv", "uri": _data_uri(summary_csv, "text/csv")},
                   _samples_download(Path(samples_csv))],
    )
    Path(out_html).write_text(html, encoding="utf-8")


def _caption(name: str) -> str:
    path = TEMPLATE.parent / f"{name}.rst"
    return " ".join(path.read_text().split()) if path.exists() else ""


EMBED_CSV_BYTES = 1 << 20  # a bigger samples table is embedded as Parquet, which keeps the report small


def _samples_download(samples_csv: Path) -> dict:
    if samples_csv.stat().st_size <= EMBED_CSV_BYTES or not samples_csv.with_suffix(".parquet").exists():
        return {"name": "samples.csv", "uri": _data_uri(samples_csv, "text/csv")}
    return {"name": "samples.parquet",
            "uri": _data_uri(samples_csv.with_suffix(".parquet"), "application/vnd.apache.parquet")}


def _data_uri(path: Path, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(Path(path).read_bytes()).decode('ascii')}"


def _format(value) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    return "" if value is None or value is pd.NA else str(value)


def _shape(row) -> str:
    return "×".join(str(getattr(row, axis)) for axis in workloads.get(row.workload).axes)


def _table(df: pd.DataFrame) -> dict:
    return {"columns": list(df.columns),
            "rows": [[_format(v) for v in row] for row in df.itertuples(index=False)]}


def _flatten(mapping: dict, prefix: str = "") -> list[tuple[str, str]]:
    """Nested dicts become dotted keys (peak_tflops.fp32), so every fact gets one line."""
    items = []
    for key, value in mapping.items():
        if isinstance(value, dict):
            items += _flatten(value, f"{prefix}{key}.")
        else:
            items.append((f"{prefix}{key}", _format(value)))
    return items


def _flagged(value) -> bool:
    return False if value is None or pd.isna(value) else bool(value)


def _best_per_family(summary: pd.DataFrame) -> list[dict]:
    """Per (gpu, mode, cache): rows = shapes, one cell per family with its fastest variant."""
    ok = summary[(summary["status"] == "ok") & (summary["workload"] == "gemm")].dropna(subset=["tflops"])
    if ok.empty:
        return []
    best = ok.loc[ok.groupby(["gpu", "mode", "cache", "family", "m", "n", "k"])["tflops"].idxmax()]
    tables = []
    for (gpu, mode, cache), group in best.groupby(["gpu", "mode", "cache"], sort=True):
        families = sorted(group["family"].unique(), key=lambda f: (f != "cublas", f))
        rows = []
        for (m, n, k), shape in group.groupby(["m", "n", "k"]):
            cells = {r.family: {"variant": r.variant, "tflops": _format(r.tflops),
                                "pct": "" if pd.isna(r.pct_of_cublas) else f"{r.pct_of_cublas:.1f}",
                                "clock": "" if pd.isna(getattr(r, "sm_clock_mhz", None)) else f"{r.sm_clock_mhz:.0f}",
                                "throttled": r.throttle_reasons if _flagged(getattr(r, "throttled", None)) else ""}
                     for r in shape.itertuples()}
            rows.append({"size": f"{m}×{n}×{k}", "volume": m * n * k, "cells": cells})
        tables.append({"title": f"{gpu} · {mode} · {cache} cache", "families": families,
                       "rows": sorted(rows, key=lambda r: r["volume"])})
    return tables


def _ladders(summary: pd.DataFrame) -> list[dict]:
    """Per (gpu, family, mode): rows = variants in ladder order, columns = sweep sizes, TFLOP/s and % of cuBLAS."""
    from gemmbench.plots import ladder_rows

    rows = ladder_rows(summary[summary["status"] == "ok"].dropna(subset=["tflops"]))
    tables = []
    for (gpu, family, mode, cache), group in rows.groupby(["gpu", "family", "mode", "cache"], sort=True):
        sizes = sorted(group["m"].astype(int).unique())
        table = {}
        for r in group.sort_values("variant").itertuples():
            table.setdefault(r.variant, {})[int(r.m)] = {"tflops": _format(r.tflops), "pct": f"{r.pct_of_cublas:.1f}"}
        tables.append({"title": f"{family} · {gpu} · {mode} · {cache} cache", "sizes": sizes,
                       "rows": [{"variant": v, "cells": cells} for v, cells in table.items()]})
    return tables


SLOWER_THAN_UNFUSED = 0.9  # a fused variant below this speedup over the best unfused one is explained


def _b2b_tables(summary: pd.DataFrame, devices: list[dict]) -> list[dict]:
    """Per (gpu, mode, cache): rows = b2b shapes, columns = variants: time, and speedup over two cuBLAS calls;
    then every point where a fused variant is slower than 0.9× the best unfused one, and why."""
    ok = summary[(summary["status"] == "ok") & (summary["workload"] == "b2b")]
    bandwidth = {d["gpu_uuid"]: d.get("copy_bandwidth_gbps") for d in devices}
    tables = []
    for (gpu, mode, cache), group in ok.groupby(["gpu", "mode", "cache"], sort=True):
        variants = sorted(group["family"] + "/" + group["variant"], key=lambda v: (not v.startswith("cublas"), v))
        rows = {}
        for r in group.sort_values(["m", "k0", "n0", "n1"]).itertuples():
            speedup = "" if pd.isna(r.speedup_vs_cublas) else f"{r.speedup_vs_cublas:.2f}×"
            rows.setdefault(_shape(r), {})[f"{r.family}/{r.variant}"] = {
                "time_us": f"{r.median_s * 1e6:.1f}", "speedup": speedup}
        fused = ~group["variant"].str.startswith(UNFUSED_PREFIX)
        slower = group[fused & (group["speedup_vs_unfused_best"] < SLOWER_THAN_UNFUSED)].sort_values(
            ["variant", "m", "k0", "n0", "n1"])
        tables.append({"title": f"{gpu} · {mode} · {cache} cache", "variants": list(dict.fromkeys(variants)),
                       "rows": [{"shape": shape, "cells": cells} for shape, cells in rows.items()],
                       "slower": [{"where": f"{r.family}/{r.variant} @ {_shape(r)}",
                                   "speedup": f"{r.speedup_vs_unfused_best:.2f}×",
                                   "why": _why_slower(r, bandwidth.get(r.gpu_uuid))}
                                  for r in slower.itertuples()]})
    return tables


def _why_slower(r, bandwidth_gbps) -> str:
    """The roofline's reading of a slow fused point: was the unfused pair limited by the traffic fusion saves?"""
    unfused_bytes = r.min_bytes + 2 * workloads.ELEMENT_BYTES * r.m * r.n0  # A1 written, then read back
    intensity = r.flops / unfused_bytes
    unfused_tflops = r.tflops / r.speedup_vs_unfused_best
    if not bandwidth_gbps or pd.isna(r.peak_tflops):
        return f"the fused kernel computes at {r.tflops:.3g} TFLOP/s, the best unfused pair at {unfused_tflops:.3g}"
    ridge = r.peak_tflops * 1e3 / bandwidth_gbps
    if intensity >= ridge:
        return (f"compute-bound even unfused ({intensity:.0f} FLOP/byte with the intermediate, above the ridge "
                f"at {ridge:.0f}): the traffic fusion saves was not the limit, and the fused kernel computes at "
                f"{r.tflops:.3g} TFLOP/s against {unfused_tflops:.3g} for the unfused pair")
    return (f"memory-bound unfused ({intensity:.0f} FLOP/byte, below the ridge at {ridge:.0f}), but the fused "
            f"kernel moves its minimum traffic at {r.gbps:.0f} GB/s, {100 * r.gbps / bandwidth_gbps:.0f}% of the "
            f"copy bandwidth: it is bound by neither, computing at {r.tflops:.3g} TFLOP/s against "
            f"{unfused_tflops:.3g} for the unfused pair")


def _validation_matrix(validation: pd.DataFrame) -> dict:
    """Rows 'family/variant mode' (with the model where several), columns shapes, sweep before awkward."""
    from gemmbench.plots import several_models

    if validation.empty:
        return {"columns": [], "rows": [], "problems": []}
    validation = validation.assign(named=several_models(validation))
    ordered = validation.sort_values(["shape_kind", *SHAPE_COLUMNS], key=lambda c: c.map(
        {"sweep": 0, "awkward": 1}) if c.name == "shape_kind" else c, kind="stable")
    columns = list(dict.fromkeys((_shape(r), r.shape_kind) for r in ordered.itertuples()))
    rows, problems = {}, []
    for r in validation.sort_values(["family", "variant", "mode"]).itertuples():
        label = f"{r.family}/{r.variant} {r.mode}" + (f" · {r.gpu}" if r.named and pd.notna(r.gpu) else "")
        cell = {"status": r.status, "label": VALIDATION_LABELS.get(r.status, r.status),
                "message": _format(r.message), "rel_error": _format(r.rel_error)}
        rows.setdefault(label, {})[_shape(r)] = cell
        if r.status != "ok":
            problems.append({"where": f"{label} @ {_shape(r)} ({r.shape_kind})", **cell})
    return {"columns": columns, "rows": [{"label": k, "cells": v} for k, v in rows.items()],
            "problems": problems}
