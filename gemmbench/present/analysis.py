"""What the report says, computed from the tables: the answer at a glance, the best of each family, the ladders,
the comparison with a reference run, the validation matrix, the builds and profile sections."""
from __future__ import annotations

import numpy as np
import pandas as pd

from gemmbench.present import tables
from gemmbench.present.axes import baseline_first, flagged, ladder_rows, readable, several_models, throttled
from gemmbench.present.formatting import COMPILERS, library_version, short
from gemmbench.present.tables import SLOW
from gemmbench.workloads import SHAPE_COLUMNS, shape_text
from kernels.registry import MODES


def readable_builds(builds: pd.DataFrame) -> pd.DataFrame:
    """Build records for reading: per-class facts (kept in builds.csv) left out, parameters as short strings."""
    return builds.drop(columns=[c for c in ("classes", "git_dirty") if c in builds]).apply(
        lambda column: column.map(short) if not pd.api.types.is_numeric_dtype(column) else column)


# The build facts a reader compares along a ladder, as (column, header); a family that does not report one leaves it
# empty, and a column no build has is left out.
BUILD_FACTS = [("registers", "registers"), ("local_bytes", "spills (local bytes)"), ("shared_bytes", "shared bytes"),
               ("threads", "threads"), ("sass_ffma", "FFMA"), ("sass_hmma", "HMMA"), ("sass_hgmma", "HGMMA"),
               ("sass_lds128", "LDS.128"), ("sass_lds64", "LDS.64"), ("sass_lds32", "LDS.32"),
               ("sass_hot_loop_ffma_share", "FFMA share of hot loop"), ("compile_s", "compile (s)")]


def build_summary(builds: pd.DataFrame) -> pd.DataFrame:
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


def skipped(frame: pd.DataFrame, label) -> list[dict]:
    """The skipped rows of `frame` grouped by their reason, each named once by `label(row)`."""
    skipped = frame[frame["status"] == "skipped"]
    return [{"reason": reason, "where": ", ".join(dict.fromkeys(label(r) for r in group.itertuples()))}
            for reason, group in skipped.groupby("message", sort=True)]


NOISY = 0.05  # a point whose samples spread more than 5% is marked noisy (CPU timings, mostly)


def pct_of_baseline(r, digits: int = 0) -> str:
    """The point's % of the baseline with its 95% interval in points ("98% ±0.6"), where the table has one."""
    if pd.isna(r.pct_of_baseline):
        return ""
    ci = pd.to_numeric(getattr(r, "pct_of_baseline_ci", None), errors="coerce")
    interval = f" ±{ci:.2g}" if np.isfinite(ci) else ""  # two significant digits: often well under a point
    return f"{r.pct_of_baseline:.{digits}f}%{interval}"


def spread(r) -> str:
    """How much a point's launches vary: the samples' interquartile range relative to their median, which a few slow
    samples cannot decide, and how many slow ones there were (tables.SLOW); a table from before those columns, the
    relative standard deviation (noise, as nvbench reports it). With marks on thin, unconverged and noisy points.
    The median's confidence interval, far narrower, is a sampling detail left to the methodology and the tables."""
    iqr = pd.to_numeric(getattr(r, "iqr_rel", None), errors="coerce")
    noise = iqr if not pd.isna(iqr) else pd.to_numeric(getattr(r, "noise", None), errors="coerce")
    if pd.isna(noise):
        return ""
    slow = pd.to_numeric(getattr(r, "slow_samples", None), errors="coerce")
    marks = [f"IQR {100 * iqr:.2g}%" if not pd.isna(iqr) else f"noise {100 * noise:.2g}%"]
    if not pd.isna(slow) and slow > 0:
        marks.append(f"{slow:.0f} slow sample{'s' if slow > 1 else ''} (over {SLOW:g}× the median)")
    converged = getattr(r, "converged", None)
    if flagged(getattr(r, "thin_median", None)):
        marks.append("thin median (budget cut it short)")
    elif converged is not None and not pd.isna(converged) and not converged:
        marks.append("precision target not met")
    if noise > NOISY:
        marks.append("noisy")
    return " · ".join(marks)


HEADLINE_SIZE = 8192  # the size the answer names, when the sweep has it (else its largest)


def at_a_glance(summary: pd.DataFrame, devices: list[dict]) -> list[dict]:
    """Per GPU model (or CPU), mode (in the modes' order) and cache: one generated paragraph and the best variant of
    each family at the headline size, with TFLOP/s, % of cuBLAS and % of the mode's peak; and the whole sweep at once
    (sweep_at_a_glance)."""
    ok = summary[(summary["status"] == "ok") & (summary["workload"] == "gemm")].dropna(subset=["tflops"])
    blocks = []
    if ok.empty:
        return blocks
    order = {mode: i for i, mode in enumerate(MODES)}
    ok = ok.assign(on_cpu=ok["device"] != "cuda", mode_order=ok["mode"].map(order).fillna(len(order)))
    ok = ok.sort_values(["on_cpu", "gpu", "mode_order", "cache"])
    gpu_models = ok.loc[~ok["on_cpu"], "gpu"].nunique()  # labels name the GPU only where there are several
    for (on_cpu, gpu, _, mode, cache), group in ok.groupby(["on_cpu", "gpu", "mode_order", "mode", "cache"],
                                                           sort=False):
        sizes = sorted(group["m"].astype(int).unique())
        size = HEADLINE_SIZE if HEADLINE_SIZE in sizes else sizes[-1]
        at = group[group["m"] == size]
        best = at.loc[at.groupby("family")["tflops"].idxmax()].sort_values("tflops", ascending=False)
        rows = [{"family": r.family, "variant": r.variant, "tflops": readable(r.tflops),
                 "pct_of_baseline": pct_of_baseline(r),
                 "pct_of_peak": peak_share(r),
                 "spread": spread(r), "throttled": throttled(r)} for r in best.itertuples()]
        blocks.append({"title": f"{gpu} · {mode} · {cache} cache", "size": f"{size}×{size}×{size}",
                       "label": ("CPU · " if on_cpu and gpu_models else f"{gpu} · " if gpu_models > 1 else "")
                       + f"{mode} · {cache} cache",
                       "text": answer(best, mode, size), "rows": rows, "sweep": sweep_at_a_glance(group)})
    return blocks


def sweep_at_a_glance(group: pd.DataFrame) -> dict:
    """One mode's square sweep at once: per family (the baseline first), its fastest variant's % of the baseline at
    each size (the baseline's own row: its TFLOP/s), so that the first screen answers for every size."""
    square = group[(group["m"] == group["n"]) & (group["n"] == group["k"])]
    sizes = sorted(square["m"].astype(int).unique())
    best = square.loc[square.groupby(["family", "m"])["tflops"].idxmax()]
    rows = []
    for family in baseline_first(best):
        points = best[best["family"] == family].set_index("m")
        baseline = (points["role"] == "baseline").all()
        cells = []
        for size in sizes:
            if size not in points.index:
                cells.append("–")
                continue
            r = points.loc[size]
            cells.append(f"{readable(r.tflops)} TFLOP/s" if baseline or pd.isna(r.pct_of_baseline)
                         else f"{r.pct_of_baseline:.0f}%")
        rows.append({"family": family, "cells": cells})
    return {"sizes": [f"{size:,}" for size in sizes], "rows": rows}


def at_a_glance_speedups(summary: pd.DataFrame) -> list[dict]:
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


def side_by_side(summary: pd.DataFrame) -> list[dict]:
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
            f" · {pct_of_baseline(r)}" if pct_of_baseline(r) else "")
            + (f" ⚠ throttled ({throttled(r)})" if throttled(r) else "") for r in rows.itertuples()}}
            for family, rows in ((family, best[best["family"] == family]) for family in baseline_first(best))]
        tables.append({"title": f"{mode} · {cache} cache · {size}×{size}×{size}", "models": models, "rows": rows})
    return tables


def comparison(summary: pd.DataFrame, name: str, other: pd.DataFrame) -> dict:
    """This run against a reference run (`name`, its summary): where the reference came from (GPU, commit,
    toolchain), the points both measured, the run-to-run band (the median |difference|), and each point that moved
    beyond its noise: more than max(2%, 3 × the band, 3 × the two runs' combined noise at that point)."""

    both = tables.compare(other, summary, min_size=0)
    source = reference_source(other)
    if both.empty:
        return {"name": name, "source": source, "rows": [],
                "text": "The two runs have no successfully measured point in common."}
    band = float(both["diff_pct"].abs().median())
    noise = 100 * pd.concat([pd.to_numeric(both.get(f"noise_{side}"), errors="coerce")
                             for side in "ab"], axis=1).pow(2).sum(axis=1, min_count=1).pow(0.5)
    limit = noise.mul(3).fillna(0).clip(lower=max(3 * band, 2.0))
    beyond = both.assign(limit=limit)[both["diff_pct"].abs() > limit].sort_values("diff_pct")
    faster, slower = int((beyond["diff_pct"] < 0).sum()), int((beyond["diff_pct"] > 0).sum())
    largest = [both.loc[both["diff_pct"].idxmin()], both.loc[both["diff_pct"].idxmax()]]
    named = [f"{r.diff_pct:+.1f}% at {r['family']}/{r['variant']} {r['mode']} {shape_text(r)}" for r in largest
             if (r.diff_pct < 0) == (r is largest[0]) and r.diff_pct != 0]
    text = (f"{len(both)} points both runs measured: median |difference| {band:.2f}% (the run-to-run band). A "
            f"difference is this run's median device time over the reference's, minus one: negative is faster now. "
            f"Largest: {'; '.join(named) or 'none'}. Beyond their noise (at least {max(3 * band, 2.0):.2g}%): "
            f"{faster} faster and {slower} slower in this run.")
    rows = [{"point": f"{r.family}/{r.variant} {r.mode} {shape_text(r)} · {r.gpu}",
             "before_ms": f"{1e3 * r.median_s_a:.4g}", "now_ms": f"{1e3 * r.median_s_b:.4g}",
             "diff": f"{r.diff_pct:+.1f}%", "limit": f"±{r.limit:.2g}%",
             "throttled": " / ".join(w for w, flag in (("before", r.throttled_a), ("now", r.throttled_b))
                                     if flagged(flag))} for r in beyond.itertuples()]
    return {"name": name, "source": source, "text": text, "rows": rows, **agreement(both.assign(limit=limit))}


AGREEMENT_PCT, AGREEMENT_MIN_M = 2.0, 1024  # two runs agree at a point within 2%; the points at m ≥ 1024 count
SHORT_LAUNCH_S = 1e-4  # a launch this short is timed by the events' resolution and launch overheads as much as by it


def agreement(both: pd.DataFrame) -> dict:
    """How many points (m ≥ AGREEMENT_MIN_M) the two runs agree on within AGREEMENT_PCT, and each other point with
    what may explain its difference (`both`: tables.compare's, with each point's noise limit)."""
    sized = both[both["m"] >= AGREEMENT_MIN_M] if "m" in both else both
    if sized.empty:
        return {"agreement": "", "outside": []}
    outside = sized[sized["diff_pct"].abs() > AGREEMENT_PCT].sort_values("diff_pct")
    inside = len(sized) - len(outside)
    text = (f"Of the {len(sized)} points with m ≥ {AGREEMENT_MIN_M} both runs measured, {inside} "
            f"({100 * inside / len(sized):.1f}%) are within {AGREEMENT_PCT:g}% of the reference (median |difference| "
            f"{sized['diff_pct'].abs().median():.2f}%)" + ("; the others, each with what may explain it:"
                                                          if len(outside) else "."))
    return {"agreement": text, "outside": [{"point": f"{r.family}/{r.variant} {r.mode} {shape_text(r)} · {r.gpu}",
                                            "diff": f"{r.diff_pct:+.1f}%", "reason": difference_reason(r)}
                                           for r in outside.itertuples()]}


def difference_reason(r) -> str:
    """What may explain a point's difference between two runs, from what both runs recorded at it."""
    reasons = [f"throttled {when} ({cause if isinstance(cause, str) and cause else 'clock dropped'})"
               for when, flag, cause in (
            ("in the reference", r.throttled_a, r.throttle_reasons_a),
            ("in this run", r.throttled_b, r.throttle_reasons_b)) if flagged(flag)]
    if min(r.median_s_a, r.median_s_b) < SHORT_LAUNCH_S:
        reasons.append(f"a launch under {SHORT_LAUNCH_S * 1e6:.0f} µs")
    if not r.same_gpu:
        reasons.append("another GPU of the model")
    if abs(r.diff_pct) <= r.limit:
        reasons.append(f"within its noise (±{r.limit:.2g}%)")
    return "; ".join(reasons) or "none recorded: a change of code, compiler or the device's state"


def reference_source(other: pd.DataFrame) -> str:
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
        versions["cublas"] = library_version(versions["cublas"])
    compilers = ", ".join(f"{name} {versions[key]}" for key, name in COMPILERS.items() if versions.get(key))
    return (f"{values('gpu')} ({values('gpu_uuid', 12)}), driver {values('driver')}, commit "
            f"{values('git_commit', 7)}" + (f"; {compilers}" if compilers else ""))


def answer(best: pd.DataFrame, mode: str, size: int) -> str:
    """The paragraph on top: the baseline's share of the peak, then how close each family's best comes to it."""
    words = []
    baseline = best[best["role"] == "baseline"]
    for r in baseline.itertuples():
        peak = "" if pd.isna(r.pct_of_peak) else (f", {r.pct_of_peak:.0f}% of the {mode} peak "
                                                  f"({readable(r.peak_tflops)} TFLOP/s at the max SM clock)"
                                                  + _at_clock(r, " and {pct:.0f}% of it at the {mhz:.0f} MHz "
                                                                 "it ran at"))
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
    elif baseline.empty:  # a CPU: compared with its host's cuBLAS, where one ran on the same host
        words.append(f"At {size}×{size}×{size}: " + "; ".join(
            f"{r.family}/{r.variant} {readable(r.tflops)} TFLOP/s"
            + ("" if pd.isna(r.pct_of_peak) else f", {r.pct_of_peak:.2g}% of this CPU's bound")
            + ("" if pd.isna(r.pct_of_baseline) else f", {r.pct_of_baseline:.2g}% of its host's cuBLAS")
            for r in best.itertuples()) + ".")
    return " ".join(words)


def _at_clock(r, text: str) -> str:
    """`text` filled with the point's % of peak at the clock it ran at (pct) and that clock (mhz), where it ran
    measurably below the max clock (more than a point of peak apart); else ""."""
    at_clock = pd.to_numeric(getattr(r, "pct_of_peak_at_clock", None), errors="coerce")
    mhz = pd.to_numeric(getattr(r, "sm_clock_mean_mhz", None), errors="coerce")
    if pd.isna(at_clock) or pd.isna(mhz) or pd.isna(r.pct_of_peak) or abs(at_clock - r.pct_of_peak) < 1:
        return ""
    return text.format(pct=at_clock, mhz=mhz)


def peak_share(r) -> str:
    """% of the mode's peak at the max SM clock, and at the clock the point ran at where that was lower."""
    if pd.isna(r.pct_of_peak):
        return ""
    share = f"{r.pct_of_peak:.0f}%" if r.pct_of_peak >= 10 else f"{r.pct_of_peak:.2g}%"  # a CPU's share is small
    return share + _at_clock(r, " ({pct:.0f}% at {mhz:.0f} MHz)")


def window_clock(r) -> str:
    """The SM clock over the sampling window (its mean; NVML read every 10 ms), not the snapshot before it; that
    snapshot only where the window has none (an older table)."""
    for name in ("sm_clock_mean_mhz", "sm_clock_mhz"):
        value = pd.to_numeric(getattr(r, name, None), errors="coerce")
        if not pd.isna(value):
            return f"{value:.0f}"
    return ""


def best_per_family(summary: pd.DataFrame) -> list[dict]:
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
            cells = {r.family: {"variant": r.variant, "tflops": format(r.tflops),
                                "pct": pct_of_baseline(r, digits=1),
                                "clock": window_clock(r),
                                "peak": peak_share(r),
                                "spread": spread(r),
                                "throttled": throttled(r)}
                     for r in shape.itertuples()}
            rows.append({"size": f"{m}×{n}×{k}", "volume": m * n * k, "cells": cells})
        tables.append({"title": f"{gpu} · {mode} · {cache} cache", "families": families,
                       "rows": sorted(rows, key=lambda r: r["volume"])})
    return tables


def ladders(summary: pd.DataFrame, builds: pd.DataFrame | None = None) -> list[dict]:
    """Per (gpu, family, mode): rows = variants in ladder order, with what each is and, from its build, its
    registers and shared loads by width (SASS, where read); columns = sweep sizes, TFLOP/s and % of cuBLAS."""

    rows = ladder_rows(summary[summary["status"] == "ok"].dropna(subset=["tflops"]))
    built = {(b["family"], b["variant"], b["mode"]): b for b in (builds.to_dict("records") if builds is not None
                                                                  and not builds.empty else [])}
    tables = []
    for (gpu, family, mode, cache), group in rows.groupby(["gpu", "family", "mode", "cache"], sort=True):
        sizes = sorted(group["m"].astype(int).unique())
        table = {}
        for r in group.sort_values("variant").itertuples():
            table.setdefault(r.variant, {})[int(r.m)] = {"tflops": format(r.tflops), "pct": f"{r.pct_of_baseline:.1f}",
                                                         "throttled": throttled(r)}
        tables.append({"title": f"{family} · {gpu} · {mode} · {cache} cache", "sizes": sizes,
                       "rows": [{"variant": v, "cells": cells, **build_facts(built.get((family, v, mode), {}))}
                                for v, cells in table.items()]})
    return tables


SHARED_LOADS = (("sass_lds128", "LDS.128"), ("sass_lds64", "LDS.64"), ("sass_lds32", "LDS.32"))


def build_facts(build: dict) -> dict:
    """What a ladder row says of its variant's build: what it is, its registers, its shared loads by width."""
    def number(column):
        value = pd.to_numeric(build.get(column), errors="coerce")
        return None if pd.isna(value) else int(value)
    loads = [f"{name} {number(column)}" for column, name in SHARED_LOADS if number(column) is not None]
    description, registers = build.get("description"), number("registers")
    return {"description": description if isinstance(description, str) else "",
            "registers": "–" if registers is None else registers,
            "loads": " · ".join(loads) or "–"}


VALIDATION_LABELS = {"ok": "pass", "failed": "fail"}  # other statuses keep their own name


def validation_matrix(validation: pd.DataFrame) -> dict:
    """Rows 'family/variant mode' (with the model where several), columns shapes, sweep before awkward."""

    if validation.empty:
        return {"columns": [], "rows": [], "problems": [], "skipped": [], "counts": ""}
    validation = validation.assign(named=several_models(validation))
    ordered = validation.sort_values(["shape_kind", *SHAPE_COLUMNS], key=lambda c: c.map(
        {"sweep": 0, "awkward": 1}) if c.name == "shape_kind" else c, kind="stable")
    columns = list(dict.fromkeys((shape_text(r), r.shape_kind) for r in ordered.itertuples()))
    rows, problems = {}, []
    for r in validation.sort_values(["family", "variant", "mode"]).itertuples():
        label = f"{r.family}/{r.variant} {r.mode}" + (f" · {r.gpu}" if r.named and pd.notna(r.gpu) else "")
        cell = {"status": r.status, "label": VALIDATION_LABELS.get(r.status, r.status),
                "message": format(r.message), "rel_error": format(r.rel_error)}
        rows.setdefault(label, {})[shape_text(r)] = cell
        if r.status not in ("ok", "skipped"):
            problems.append({"where": f"{label} @ {shape_text(r)} ({r.shape_kind})", **cell})
    counts = validation["status"].map(lambda s: VALIDATION_LABELS.get(s, s)).value_counts()
    return {"columns": columns, "rows": [{"label": k, "cells": v} for k, v in rows.items()],
            "problems": problems, "skipped": skipped(validation, lambda r: f"{r.family}/{r.variant} {r.mode}"),
            "counts": f"{len(validation)} checks of {len(rows)} variant-modes at {len(columns)} shapes: "
                      + ", ".join(f"{n} {label}" for label, n in counts.items())}
