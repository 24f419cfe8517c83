"""Raw stage outputs -> tidy tables (summary, samples, validation, builds), checked against their schema."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from gemmbench import ROOT, workloads
from gemmbench.present import views
from gemmbench.workloads import SHAPE_COLUMNS

SCHEMA = yaml.safe_load((ROOT / "workflow" / "schemas" / "tables.schema.yaml").read_text())["tables"]
# row field -> timer in the samples table (batched: per-launch seconds of a sample of batch_launches launches)
SAMPLE_COLUMNS = {"sample_device_s": "device", "sample_batched_s": "batched", "warmup_host_s": "host"}


def read_rows(paths) -> list[dict]:
    """Every row of the stage outputs at `paths`."""
    return [row for p in paths for row in json.loads(Path(p).read_text())["rows"]]


def devices(paths, device_reason: str = "") -> list[dict]:
    """One facts record per device (UUID) that ran a point, from the stage outputs that ran there; where several
    jobs measured one device, the best copy bandwidth is its ceiling. A CPU fallback's reason goes with the CPU."""
    by_uuid: dict[str, dict] = {}
    for facts in (d for p in paths for d in json.loads(Path(p).read_text())["devices"]):
        known = by_uuid.get(facts["gpu_uuid"])
        if known is None or facts["copy_bandwidth_gbps"] > known["copy_bandwidth_gbps"]:
            by_uuid[facts["gpu_uuid"]] = facts
    return [{**d, "device_reason": device_reason if d["device"] == "cpu" else ""}
            for _, d in sorted(by_uuid.items())]


def check_columns(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """A table read back from disk (by tests, or a user) against the schema."""
    missing = [c for c in SCHEMA[name]["required"] if c not in frame.columns]
    if missing:
        raise ValueError(f"table {name} lacks required columns {missing}")
    return frame


def typed_frame(rows: list[dict], name: str) -> pd.DataFrame:
    """The rows as a table with every column the schema requires (empty where no row has it); shape columns are
    integers, empty on the rows of a workload without that axis."""
    frame = pd.DataFrame(rows)
    for column in SCHEMA[name]["required"]:
        if column not in frame.columns:
            frame[column] = np.nan
    return frame.astype({c: "Int64" for c in SHAPE_COLUMNS if c in frame.columns})


def per_workload(frame: pd.DataFrame, evaluate) -> pd.Series:
    """evaluate(workload, sizes, mode) on the rows of each workload and mode (sizes: its axes as float columns), e.g.
    a workload's FLOPs, or its minimum bytes, which depend on the mode's operand storage too."""
    values = pd.Series(np.nan, index=frame.index)
    for (name, mode), rows in frame.groupby(["workload", "mode"]):
        workload = workloads.get(name)
        values[rows.index] = evaluate(workload, {axis: rows[axis].astype(float) for axis in workload.axes}, mode)
    return values


def noise(samples) -> float:
    """A point's noise as nvbench reports it: the relative standard deviation of its samples (nan under two)."""
    x = np.asarray([] if samples is None else samples, dtype=float)
    return float(x.std(ddof=1) / x.mean()) if x.size >= 2 and x.mean() > 0 else np.nan


SLOW = 1.2  # a sample this far over its point's median is a slow one: counted and named, never averaged in


def robust_spread(samples) -> dict:
    """What a few slow samples cannot decide: the samples' interquartile range relative to their median (iqr_rel),
    and how many took over SLOW times the median (slow_samples)."""
    x = np.asarray([] if samples is None else samples, dtype=float)
    if x.size < 2:
        return {"iqr_rel": np.nan, "slow_samples": 0 if x.size else np.nan}
    q1, median, q3 = np.percentile(x, [25, 50, 75])
    if median <= 0:
        return {"iqr_rel": np.nan, "slow_samples": 0}
    return {"iqr_rel": float((q3 - q1) / median), "slow_samples": int((x > SLOW * median).sum())}


SPREAD_COLUMNS = ("noise", "iqr_rel", "slow_samples")


def timed_samples(row: dict) -> list:
    """The samples a row's median came from: its batched ones where its median is theirs (a short kernel on a GPU),
    else its one-launch ones."""
    batched = row.get("batched_median_s") is not None and row.get("median_s") == row.get("batched_median_s")
    return (row.get("sample_batched_s") if batched else row.get("sample_device_s")) or []


def with_spread(summary: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """A summary from before its spread columns (SPREAD_COLUMNS), given them from the run's samples table (the
    device timer's)."""
    if "iqr_rel" in summary and summary["iqr_rel"].notna().any() or samples.empty:
        return summary
    keys = ["gpu_uuid", "workload", "family", "variant", "mode", *SHAPE_COLUMNS]
    device = samples[samples["timer"] == "device"].astype({c: "Int64" for c in SHAPE_COLUMNS})
    found = device.groupby(keys, dropna=False)["seconds"].apply(
        lambda x: pd.Series({"noise": noise(x.to_numpy()), **robust_spread(x.to_numpy())})).unstack()
    return summary.drop(columns=list(SPREAD_COLUMNS), errors="ignore").merge(found.reset_index(), on=keys, how="left")


def summary_table(bench_rows: list[dict], devices: list[dict]) -> pd.DataFrame:
    frame = typed_frame([{**{k: v for k, v in r.items() if k not in SAMPLE_COLUMNS},
                          "noise": noise(timed_samples(r)), **robust_spread(timed_samples(r))}
                         for r in bench_rows], "summary")
    frame["flops"] = per_workload(frame, lambda workload, sizes, mode: workload.flops(sizes))
    frame["min_bytes"] = per_workload(frame, lambda workload, sizes, mode: workload.min_bytes(sizes, mode))
    ok = frame.status == "ok"
    frame["tflops"] = (frame.flops / frame.median_s / 1e12).where(ok)
    frame["gbps"] = (frame.min_bytes / frame.median_s / 1e9).where(ok)

    by_uuid = {d["gpu_uuid"]: d for d in devices}
    # a GPU's peak at its max SM clock; a CPU's bound (measure/devices.py cpu_peak), which gates its times
    peak = [by_uuid.get(u, {}).get("peak_tflops", {}).get(mode, np.nan) if dev == by_uuid.get(u, {}).get("device")
            else np.nan for u, mode, dev in zip(frame.gpu_uuid, frame["mode"], frame.device)]
    bandwidth = [by_uuid.get(u, {}).get("copy_bandwidth_gbps") if dev == by_uuid.get(u, {}).get("device") else np.nan
                 for u, dev in zip(frame.gpu_uuid, frame.device)]
    # what measured each row: the driver and the toolchain of the worker that ran it (CUDA libraries included)
    versions = [by_uuid.get(u, {}).get("versions", {}) for u in frame.gpu_uuid]
    frame["driver"] = [by_uuid.get(u, {}).get("driver") or v.get("driver") for u, v in zip(frame.gpu_uuid, versions)]
    frame["toolchain"] = [" ".join(f"{k}={v}" for k, v in sorted(v.items())) or None for v in versions]
    frame["peak_tflops"] = pd.to_numeric(pd.Series(peak, index=frame.index), errors="coerce")
    frame["pct_of_peak"] = 100 * frame.tflops / frame.peak_tflops
    max_clock = pd.to_numeric(frame.gpu_uuid.map(lambda u: by_uuid.get(u, {}).get("max_sm_clock_mhz")), errors="coerce")
    window_clock = pd.to_numeric(frame.sm_clock_mean_mhz, errors="coerce")
    frame["pct_of_peak_at_clock"] = frame.pct_of_peak * max_clock / window_clock
    bandwidth = pd.to_numeric(pd.Series(bandwidth, index=frame.index), errors="coerce")
    frame["pct_of_bandwidth"] = 100 * frame.gbps / bandwidth

    # % of cuBLAS: the cuBLAS row of this run with the same workload, shape and mode on the same GPU model (a sweep
    # split over several GPUs of one model compares across them, as they agree within noise); CPU rows against the
    # cuBLAS of their own host. b2b: the speedups over two cuBLAS calls and over the fastest unfused variant.
    shape = ["workload", "mode", *SHAPE_COLUMNS]
    frame["peer"] = _peer(frame)
    frame = frame.drop(columns=["pct_of_baseline"])
    baseline = frame[(frame.role == "baseline") & ok]
    frame = _merge_reference(frame, baseline, shape).rename(columns={"reference_s": "baseline_s",
                                                                     "reference_ci_rel": "baseline_ci_rel"})
    unfused = frame[frame.role.isin(["baseline", "unfused"]) & (frame.status == "ok")]
    frame = _merge_reference(frame, unfused.sort_values("median_s"), shape).rename(
        columns={"reference_s": "unfused_best_s"}).drop(columns="reference_ci_rel")
    ok = frame.status == "ok"
    frame["pct_of_baseline"] = 100 * frame.baseline_s / frame.median_s.where(ok)
    frame["pct_of_baseline_ci"] = _ratio_interval(frame)
    fused = frame.workload.isin([name for name, view in views.VIEWS.items() if view.speedups])
    frame["speedup_vs_baseline"] = (frame.baseline_s / frame.median_s).where(ok & fused)
    frame["speedup_vs_unfused_best"] = (frame.unfused_best_s / frame.median_s).where(ok & fused)
    frame["throttled"] = frame.throttled.astype("boolean")
    for flag in ("converged", "thin_median", "git_dirty"):
        frame[flag] = frame[flag].astype("boolean")
    frame = frame.drop(columns=["peer", "baseline_s", "baseline_ci_rel", "unfused_best_s"])
    return frame.sort_values(["gpu", "workload", "family", "variant", "mode", *SHAPE_COLUMNS]).reset_index(drop=True)


def _ratio_interval(frame: pd.DataFrame) -> pd.Series:
    """The 95% interval of each row's % of the baseline, in points: its median's and the baseline's relative
    half-widths (median_ci_rel, baseline_ci_rel) added in quadrature, as the relative errors of a ratio of
    independent estimates add; none for the baseline's own rows (a ratio to itself)."""
    half = np.hypot(pd.to_numeric(frame.median_ci_rel, errors="coerce"),
                    pd.to_numeric(frame.baseline_ci_rel, errors="coerce"))
    return (frame.pct_of_baseline * half).where(frame.role != "baseline")


def _with_interval(frame: pd.DataFrame) -> pd.DataFrame:
    """A summary from before pct_of_baseline_ci, given it from its medians' half-widths (the baseline as
    summary_table finds it: same GPU model, or a CPU row's host, shape and mode)."""
    needed = {"median_ci_rel", "pct_of_baseline", "status", "device", "host"}
    if "pct_of_baseline_ci" in frame or not needed <= set(frame):
        return frame
    peered = frame.assign(peer=_peer(frame))
    baseline = peered[(peered.role == "baseline") & (peered.status == "ok")]
    merged = _merge_reference(peered, baseline, ["workload", "mode", *SHAPE_COLUMNS])
    return frame.assign(pct_of_baseline_ci=_ratio_interval(merged.rename(
        columns={"reference_ci_rel": "baseline_ci_rel"})).to_numpy())


def _peer(frame: pd.DataFrame) -> pd.Series:
    """Whose baseline a row is compared with: its GPU model, or for a CPU row its host."""
    return frame.gpu.where(frame.device == "cuda", frame.host)


def _merge_reference(frame: pd.DataFrame, reference: pd.DataFrame, shape: list[str]) -> pd.DataFrame:
    """Each row gets `reference_s` and `reference_ci_rel`: the median time, and its relative confidence half-width,
    of the first reference row with its shape and mode, on its GPU model (or, for CPU rows, its host)."""
    references = [reference.assign(peer=reference[by], reference_s=reference.median_s,
                                   reference_ci_rel=reference.median_ci_rel)[["peer", *shape, "reference_s",
                                                                              "reference_ci_rel"]]
                  for by in ("gpu", "host")]
    references = pd.concat(references).drop_duplicates(["peer", *shape])
    return frame.merge(references, on=["peer", *shape], how="left")


def samples_table(bench_rows: list[dict]) -> pd.DataFrame:
    """Every timed launch: the sampled device times, and the host times of the warm-up launches before them."""
    records = []
    for row in bench_rows:
        ident = {k: row.get(k) for k in ("gpu", "gpu_uuid", "workload", "family", "variant", "mode", *SHAPE_COLUMNS)}
        for field, timer in SAMPLE_COLUMNS.items():
            records += [{**ident, "timer": timer, "sample": i, "seconds": s}
                        for i, s in enumerate(row.get(field) or [])]
    return typed_frame(records, "samples")


def plain(record: dict) -> dict:
    """Nested values (parameters, per-class facts) as JSON text: one table cell each."""
    return {k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in record.items()}


COMPARE_KEYS = ["gpu", "workload", "family", "variant", "mode", *SHAPE_COLUMNS]


def read(path) -> pd.DataFrame:
    """A summary or validation table from disk, tables from before the b2b workload included (they lack its shape
    columns and `workload`: they are gemm), from before roles (their baseline was cuBLAS, and the columns relative
    to it were named after it) and from before the ratios' intervals."""
    frame = pd.read_csv(path).rename(columns={"pct_of_cublas": "pct_of_baseline",
                                              "speedup_vs_cublas": "speedup_vs_baseline"})
    legacy_role = frame["family"].eq("cublas").map({True: "baseline", False: ""})
    frame = frame.assign(**{c: frame[c] if c in frame else pd.NA for c in SHAPE_COLUMNS},
                         workload=frame["workload"] if "workload" in frame else "gemm",
                         role=frame["role"].astype(object).fillna("") if "role" in frame else legacy_role).astype(
        {c: "Int64" for c in SHAPE_COLUMNS})
    return _with_interval(frame)


def timed_median(frame: pd.DataFrame) -> pd.Series:
    """Each row's median as this tree reports it: a table from before single_median_s has a short GPU kernel's
    one-launch median in median_s, and the batched one, which this tree reports, beside it."""
    if "single_median_s" in frame or "batched_median_s" not in frame:
        return frame["median_s"]
    return frame["batched_median_s"].where(frame["device"] == "cuda").fillna(frame["median_s"])


def compare(a: pd.DataFrame, b: pd.DataFrame, min_size: int = 1024) -> pd.DataFrame:
    """The points both summaries measured successfully (same GPU model, variant, mode, shape; the smallest of the
    point's sizes at least `min_size`), with diff_pct = how much longer b's median device time is, and same_gpu
    (both on one GPU, by UUID)."""
    def ok_points(frame):
        columns = COMPARE_KEYS + ["gpu_uuid", "median_s", "sm_clock_mhz", "throttle_reasons", "throttled", "noise"]
        return frame.assign(median_s=timed_median(frame)).query("status == 'ok'").reindex(columns=columns)

    both = ok_points(a).merge(ok_points(b), on=COMPARE_KEYS, suffixes=("_a", "_b"))
    both = both[both[list(SHAPE_COLUMNS)].min(axis=1) >= min_size]
    return both.assign(diff_pct=100 * (both.median_s_b / both.median_s_a - 1),
                       same_gpu=both.gpu_uuid_a == both.gpu_uuid_b)
