"""One self-contained HTML report: every figure, table and download is embedded in the file. What it says is
computed in analysis.py, how values are written in formatting.py, how the numbers were made in methodology.py."""
from __future__ import annotations

import base64
from datetime import datetime, timezone
from pathlib import Path

import jinja2
import pandas as pd

from gemmbench.present import tables, time_spent, views
from gemmbench.present.analysis import (
    at_a_glance,
    at_a_glance_speedups,
    best_per_family,
    build_summary,
    comparison,
    ladders,
    readable_builds,
    side_by_side,
    skipped,
    validation_matrix,
)
from gemmbench.present.axes import ladder_rows
from gemmbench.present.counters import profile_sections
from gemmbench.present.formatting import device_name, flatten, readable_device, table
from gemmbench.workloads import SHAPE_COLUMNS, shape_text

TEMPLATE = Path(__file__).resolve().parents[2] / "workflow/report/report.html.j2"

NON_OK_COLUMNS = ["gpu", "workload", "family", "variant", "mode", *SHAPE_COLUMNS, "cache", "status", "message"]

SUMMARY_COLUMNS = [*NON_OK_COLUMNS, "role", "tflops", "pct_of_baseline", "pct_of_baseline_ci", "pct_of_peak",
                   "peak_tflops", "noise",
                   "speedup_vs_baseline", "speedup_vs_unfused_best", "failures_before", "failure_history",
                   "timing_gate", "slower_than_tuning", "tuning"]


def render_report(*, summary: pd.DataFrame, validation: pd.DataFrame, builds: pd.DataFrame,
                  samples_csv: Path, summary_csv: Path, devices: list[dict],
                  figures: dict[str, Path], out_html: Path, methodology: dict,
                  compared_with: tuple[str, pd.DataFrame] | None = None,
                  profile: pd.DataFrame | None = None, time: dict | None = None, notices: tuple = ()) -> None:
    """`figures` in reading order (the workload's view, gemmbench/present/views/); their captions are the ones
    `snakemake --report` shows (workflow/report/*.rst). `notices`: what the report says first, before a CPU run's."""
    # an empty table may arrive without columns (nothing ran); give it the ones read below
    summary = summary.reindex(columns=[*summary.columns, *(c for c in SUMMARY_COLUMNS if c not in summary)])
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE.parent),
                                     autoescape=True, undefined=jinja2.StrictUndefined)
    html = environment.get_template(TEMPLATE.name).render(
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"), slow=f"{tables.SLOW:g}",
        gpu_run=any(d.get("device") == "cuda" for d in devices), warnings=[*notices, *cpu_notices(devices)],
        provenance=provenance(summary, devices),
        glance=at_a_glance(summary, devices),
        glance_speedups=at_a_glance_speedups(summary) if "workload" in summary else [],
        side_by_side=side_by_side(summary),
        comparison=comparison(summary, *compared_with) if compared_with else None,
        best_tables=best_per_family(summary),
        ladders=ladders(summary, builds),
        profile=profile_sections(summary, profile) if profile is not None else None,
        time=time_view(time),
        workload_tables=[table for view in views.VIEWS.values() if view.sections
                         for table in view.sections(summary, devices)],
        figures=[{"name": name, "caption": f"{_caption(name)} {_drawn(summary, name)}".strip(),
                  "uri": _data_uri(figures[name], "image/png")} for name in figures],
        validation=validation_matrix(validation),
        status_counts=summary["status"].value_counts().to_dict(),
        non_ok=table(summary.loc[~summary["status"].isin(["ok", "skipped"]), NON_OK_COLUMNS]),
        failed_before=table(summary.loc[pd.to_numeric(summary["failures_before"], errors="coerce").fillna(0) > 0,
                                         [*NON_OK_COLUMNS, "failures_before", "failure_history"]]),
        slower_than_tuning=table(summary.loc[pd.to_numeric(summary["slower_than_tuning"], errors="coerce") > 0,
                                              [*NON_OK_COLUMNS[:-1], "slower_than_tuning", "message"]]),
        transferred=table(summary.loc[summary["tuning"].astype("string").fillna("").str.startswith("transferred"),
                                       ["gpu", "family", "variant", "mode", "tuning"]].drop_duplicates()),
        ungated=table(summary.loc[summary["timing_gate"].astype("string").fillna("").str.startswith("unchecked"),
                                   [*NON_OK_COLUMNS[:-2], "timing_gate"]]),
        skipped=skipped(summary, lambda r: f"{r.family}/{r.variant} {r.mode} {shape_text(r)}"),
        builds=table(readable_builds(builds)),
        build_summary=table(build_summary(builds)),
        devices=[{"name": device_name(device), "facts": flatten(readable_device(device))} for device in devices],
        methodology=flatten(methodology),
        downloads=[{"name": "summary.csv", "uri": _data_uri(summary_csv, "text/csv")},
                   *_samples_downloads(Path(samples_csv))],
    )
    Path(out_html).write_text(html, encoding="utf-8")


PART_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666",
                "#1f78b4", "#b2df8a", "#fb9a99")


def _search_parts(found: dict) -> str:
    """A search's GPU seconds by part (time_spent.trial_parts), the rest being its job's (worker, loading, picking)."""
    parts = found.get("parts") or {}
    if not parts:
        return ""
    rest = f"; the rest {found['gpu_s'] - sum(parts.values()):.1f}" if found.get("gpu_s") else ""
    return ", ".join(f"{part} {seconds:.1f}" for part, seconds in parts.items()) + rest


def time_view(time: dict | None) -> dict | None:
    """The run's time (time_spent.breakdown) as the report draws it: the GPU's serial path as one bar of parts, each
    with its seconds, share and meaning, and the CPU's jobs beside it."""
    if not time:
        return None
    total = sum(time["gpu_path"].values())
    meaning = {"tune": "the tune jobs: searches, or reading committed records", **time_spent.MEASURE_PARTS,
               "profile": "Nsight Compute's replays of one launch per point"}
    parts = [{"part": part, "seconds": f"{seconds:.1f}", "share": 100 * seconds / total if total else 0.0,
              "meaning": meaning[part], "colour": PART_COLOURS[i % len(PART_COLOURS)]}
             for i, (part, seconds) in enumerate(time["gpu_path"].items())]
    jobs = time["jobs"]
    return {"total": f"{total:.1f}", "parts": parts,
            "cpu": [{"stage": stage, "seconds": f"{seconds:.1f}"} for stage, seconds in time["cpu"].items()],
            "jobs": [{"stage": r.stage, "count": int(r["count"]), "seconds": f"{r['sum']:.1f}"}
                     for _, r in jobs.iterrows()],
            "searches": [{**found, **{key: "" if found[key] is None else found[key] for key in ("ok", "behind")},
                          **{key: "–" if found[key] is None else f"{found[key]:.1f}"
                             for key in ("compile_s", "gpu_s", "code_s")},
                          "parts": _search_parts(found)}
                         for found in time.get("searches", [])],
            "contests": [{**held, **{key: f"{held[key]:.3f}" for key in ("winner_ms", "runner_up_ms")},
                          "margin": f"{100 * (held['runner_up_ms'] / held['winner_ms'] - 1):.1f}%"}
                         for held in time.get("contests", [])]}


COMPILERS = {"nvrtc": "NVRTC (CuPy)", "nvidia-cuda-nvrtc": "NVRTC wheel", "nvvm": "NVVM", "numba": "Numba",
             "cupy-cuda13x": "CuPy", "cupy-cuda12x": "CuPy", "apache-tvm": "TVM", "cublas": "cuBLAS"}


def cpu_notices(devices: list[dict]) -> list[str]:
    """What a run on CPUs alone says first: that it is one, on which CPU, and why (no GPU visible, or asked for)."""
    if any(d.get("device") == "cuda" for d in devices) or not devices:
        return [f"CPU run — {d.get('cpu') or d.get('gpu', 'cpu')}: {d['device_reason']}" for d in devices
                if d.get("device") == "cpu" and d.get("device_reason")]
    return [f"A CPU run: the CPU families on {d.get('cpu') or d.get('gpu', 'this CPU')}"
            + (f" ({d['device_reason']})" if d.get("device_reason") else " (device: cpu)")
            + ". No GPU ran, so nothing here is compared with cuBLAS; on a GPU box the same command runs the GPU "
              "families." for d in devices]


def provenance(summary: pd.DataFrame, devices: list[dict]) -> list[str]:
    """The lines under the title: each device with its driver, the compilers and libraries that made the numbers,
    and the commit and sources that ran; a summary from before a column was kept leaves that part out."""
    lines = []
    for device in devices:
        facts = readable_device(device)
        if device.get("device") == "cuda":
            cuda = (f" (CUDA {facts['cuda_driver']})" if facts.get("cuda_driver") else "") + \
                (f", CUDA runtime {facts['cuda_runtime']}" if facts.get("cuda_runtime") else "")
            power = (f", power cap {device['power_limit_w']:.0f} W"
                     if device.get("power_limit_w") else "")
            lines.append(f"{device.get('gpu', '')} ({str(device.get('gpu_uuid', ''))[:12]}), driver "
                         f"{device.get('driver', '?')}{cuda}{power}")
        else:
            lines.append(device_name(device))
    versions = next((d.get("versions") for d in devices if d.get("device") == "cuda" and d.get("versions")), None) \
        or next((d.get("versions") for d in devices if d.get("versions")), {})
    versions = readable_device({"versions": versions})["versions"]
    compilers = [f"{name} {versions[key]}" for key, name in COMPILERS.items() if versions.get(key)]
    if compilers:
        lines.append("Compilers and libraries: " + ", ".join(compilers))
    when = pd.to_datetime(summary["measured_at"], errors="coerce", utc=True).dropna() \
        if "measured_at" in summary else pd.Series(dtype="datetime64[ns, UTC]")
    lines.append(f"Measured {when.min():%Y-%m-%d %H:%M} to {when.max():%Y-%m-%d %H:%M} UTC" if len(when) else
                 "When the points were measured: not in these tables (they predate the column)")
    if "git_commit" in summary and summary["git_commit"].notna().any():
        commits = summary["git_commit"].dropna().astype(str).str[:7].unique()
        edited = "git_dirty" in summary and summary["git_dirty"].fillna(False).astype(bool).any()
        sources = summary["source_digest"].dropna().nunique() if "source_digest" in summary else 0
        digests = f"; {sources} source digests (the harness and each variant's files, per row)" if sources else ""
        lines.append(f"Commit {', '.join(commits)}{' with edits' if edited else ''}{digests}")
    return lines


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
