"""Seaborn figures of the tidy tables, each written as PNG and SVG."""
from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterator
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: plots run in Snakemake jobs without a display
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import ticker

from gemmbench import workloads
from gemmbench.measure import checking
from gemmbench.present import views
from gemmbench.present.axes import (
    baseline_first,
    figure_problems,
    ladder_rows,
    log2_size_axis,
    modes_in,
    placeholder,
    readable,
    several_models,
)
from gemmbench.present.tables import per_workload

log = logging.getLogger("gemmbench")

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p"]


def variant_styles(*frames: pd.DataFrame) -> dict[str, tuple]:
    """A colour and a marker per series (family/variant), the same in every figure of a report: a family's variants,
    in ladder (file) order, get colours spread over the whole hue circle where they are more than ten (tab10 repeats
    after ten), so that no two rungs of one ladder share a colour, and a marker each as well."""
    frames = [f[["family", "series"]] for f in frames if not f.empty and "series" in f]
    series = pd.concat(frames).drop_duplicates() if frames else pd.DataFrame(columns=["family", "series"])
    styles = {}
    for _, rows in series.groupby("family"):
        names = sorted(rows["series"])
        if len(names) <= 10:
            colours = sns.color_palette("tab10", len(names))
        else:  # hues stepped around the circle by a stride prime to their count: neighbouring rungs far apart
            hues = sns.color_palette("husl", len(names))
            stride = next(k for k in range(len(names) // 3, len(names)) if math.gcd(k, len(names)) == 1)
            colours = [hues[(i * stride) % len(names)] for i in range(len(names))]
        styles.update({name: (colour, MARKERS[i % len(MARKERS)])
                       for i, (name, colour) in enumerate(zip(names, colours))})
    return styles


STYLES: dict[str, tuple] = {}  # this report's variant_styles, set by plot_all for the figures it draws


def _style(series: str) -> tuple:
    return STYLES.get(series) or (sns.color_palette("tab10")[hash(series) % 10], "o")


def draw_all(summary: pd.DataFrame, validation: pd.DataFrame, devices: list[dict],
             names=views.get("gemm").figures) -> Iterator[tuple[str, plt.Figure]]:
    """The named figures (views.figure_name: each draws one workload's rows), drawn one at a time."""
    ok = _with_labels(summary[summary["status"] == "ok"].dropna(subset=["tflops"])
                      if not summary.empty else summary)
    checked = _with_labels(validation.dropna(subset=["rel_error"]) if not validation.empty else validation)
    STYLES.clear()
    STYLES.update(variant_styles(_with_labels(summary), checked))
    drawn = {
        "tflops_vs_size": lambda ok, checked: _tflops_vs_size(ok),
        "pct_of_baseline": lambda ok, checked: _pct_of_baseline(ok),
        "ladder": lambda ok, checked: _ladder(ok),
        "roofline": lambda ok, checked: _roofline(ok, devices),
        "validation_error": lambda ok, checked: _validation_error(checked),
        **{name: (lambda ok, checked, make=make: make(ok))
           for view in views.VIEWS.values() for name, make in view.plots.items()},
    }
    for name in names:
        workload, figure = views.figure_of(name)
        yield name, drawn[figure](_of_workload(ok, workload), _of_workload(checked, workload))


def plot_all(summary: pd.DataFrame, validation: pd.DataFrame, devices: list[dict],
             outdir: Path, names=views.get("gemm").figures) -> dict[str, Path]:
    """Write the named figures into `outdir`; return {figure name: PNG path}. What a figure would hide from its reader
    (figure_problems) is said in the log."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    figures = {}
    for name, fig in draw_all(summary, validation, devices, names):
        for problem in figure_problems(fig):
            log.warning("figure %s: %s", name, problem)
        figures[name] = save(fig, outdir / name)
    return figures


def _of_workload(df: pd.DataFrame, workload: str) -> pd.DataFrame:
    return df[df["workload"] == workload] if "workload" in df else df


def _with_labels(df: pd.DataFrame) -> pd.DataFrame:
    """Add `series` (family/variant, plus the GPU model or cache where they vary) and `size` columns."""
    if df.empty:
        return df
    series = df["family"] + "/" + df["variant"]
    series = series.where(~several_models(df), series + " · " + df["gpu"].astype(str))
    if "cache" in df and df["cache"].nunique() > 1:
        series = series + " · " + df["cache"].astype(str)
    return df.assign(series=series,
                     size=per_workload(df, lambda workload, sizes, mode: views.get(workload.name).position(sizes)))


WIDE_RANGE = 20  # values spanning more than this factor are drawn on a log axis (a CPU next to a GPU, a ladder)


def _wide(values: pd.Series) -> bool:
    values = values[values > 0]
    return bool(len(values) and values.max() > WIDE_RANGE * values.min())


MODE_LINES = {"fp32": "-", "tf32": "--", "bf16": ":"}  # a family's modes told apart by line style; variants by colour


def _family_grid(df: pd.DataFrame, draw, title: str, ylabel: str, xlabel: str = "size (n, or (m·n·k)^⅓)",
                 log: bool = False) -> plt.Figure:
    """One panel per family, one under another (the baseline's first), so that no panel holds more series than a
    reader can tell apart; `draw(ax, rows)` fills a panel with the family's rows and labels what it drew. Each panel's
    legend sits to its right, outside the data, and each panel's y axis fits its own values (`log`: a log axis where
    they span a wide range), so that one slow point of one family does not squeeze the others."""
    families = baseline_first(df)
    fig, axes = plt.subplots(len(families), 1, figsize=(10.5, 2.9 * len(families)), squeeze=False)
    for ax, family in zip(axes[:, 0], families):
        rows = df[df["family"] == family]
        draw(ax, rows)
        log2_size_axis(ax, df["size"])
        ax.set_title(family, loc="left", fontsize=10)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", color="0.92", linewidth=0.8)
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
                  ncol=2 if len(labels) > 12 else 1, borderaxespad=0)
    for ax in axes[:, 0]:
        if log and not ax.get_yscale() == "log":
            _fit_log_axis(ax)
    axes[-1, 0].set_xlabel(xlabel)
    fig.suptitle(title, x=0.02, ha="left", y=1.0)
    fig.tight_layout()
    return fig


LOG_SPAN = 1e4  # a log axis shows at most four decades below its highest value; points under it are named instead


def _fit_log_axis(ax: plt.Axes, values=None) -> None:
    """A log y axis over the panel's own points (`values`, else those of its lines and markers), at most LOG_SPAN
    deep: a point far below the rest (a CPU kernel at 5e-5 TFLOP/s) is written under the axis, not allowed to stretch
    it."""
    if values is None:
        lines = [np.asarray(line.get_ydata(), dtype=float) for line in ax.get_lines()]
        markers = [np.asarray(c.get_offsets(), dtype=float).reshape(-1, 2)[:, 1] for c in ax.collections]
        values = np.concatenate(lines + markers or [[]])
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    ax.set_yscale("log")
    if not values.size:
        return
    low = max(values.min(), values.max() / LOG_SPAN)
    ax.set_ylim(low / 1.6, values.max() * 1.6)
    below = values[values < low / 1.6]
    if below.size:
        ax.annotate(f"{below.size} point{'s' if below.size > 1 else ''} below the axis (lowest {below.min():.2g})",
                    (0.01, 0.02), xycoords="axes fraction", fontsize=8, color="tab:red")


def _variant_lines(ax: plt.Axes, rows: pd.DataFrame, y: str) -> None:
    """One line per variant (its colour and marker, the same in every figure) and mode (line style); the legend
    names each variant once, without the family's name, and each line style once."""
    modes = modes_in(rows)
    for series, points in rows.groupby("series"):
        colour, marker = _style(series)
        for index, (mode, line) in enumerate(points.groupby("mode")):
            line = line.sort_values("size")
            ax.plot(line["size"], line[y], color=colour, linestyle=MODE_LINES.get(mode, ":"), marker=marker,
                    markersize=4, linewidth=1.3, label=series.split("/", 1)[1] if index == 0 else "_" + series)
    if len(modes) > 1:
        for mode in modes:
            ax.plot([], [], color="0.3", linestyle=MODE_LINES.get(mode, ":"), label=f"— {mode}")


def _tflops_vs_size(ok: pd.DataFrame) -> plt.Figure:
    if ok.empty:
        return placeholder("TFLOP/s vs size", "no successful benchmark points in this run")
    baseline = ok[ok["role"] == "baseline"]

    def draw(ax, rows):
        if not (rows["role"] == "baseline").any():  # the baseline, faint, in every other panel
            for (series, mode), line in baseline[baseline["mode"].isin(rows["mode"])].groupby(["series", "mode"]):
                line = line.groupby("size")["tflops"].max()
                ax.plot(line.index, line.values, color="0.65", linestyle=MODE_LINES.get(mode, ":"), linewidth=1,
                        label=f"{series} {mode}" if mode == modes_in(rows)[0] else "_baseline")
        _variant_lines(ax, rows, "tflops")

    return _family_grid(ok, draw, "Achieved TFLOP/s vs size, per family", "TFLOP/s", log=_wide(ok["tflops"]))


def _pct_of_baseline(ok: pd.DataFrame) -> plt.Figure:
    compared = ok.dropna(subset=["pct_of_baseline"]) if not ok.empty else ok
    compared = compared[compared["role"] != "baseline"] if not compared.empty else compared
    if compared.empty or not (ok["role"] == "baseline").any():
        return placeholder("% of cuBLAS vs size",
                            "no cuBLAS rows in this run (CPU-only run?): nothing to compare against")

    def draw(ax, rows):
        ax.axhline(100, color="black", linestyle="--", linewidth=1, label="the baseline")
        _variant_lines(ax, rows, "pct_of_baseline")
        if _wide(rows["pct_of_baseline"]):
            _fit_log_axis(ax)
        else:
            ax.set_ylim(0, max(110, rows["pct_of_baseline"].max() * 1.05))

    return _family_grid(compared, draw, "Speed relative to cuBLAS (same GPU, shape, mode), per family", "% of cuBLAS")


def _ladder(ok: pd.DataFrame) -> plt.Figure:
    rows = ladder_rows(ok)
    if rows.empty:
        return placeholder("The ladders", "no family with several variants has a % of cuBLAS in this run")
    rows = rows.assign(n=rows["m"].astype(int).astype(str), panel=rows["family"] + " · " + rows["mode"]).sort_values(
        ["family", "mode", "variant"])
    sizes = sorted(rows["n"].unique(), key=int)
    grid = sns.catplot(data=rows, x="variant", y="pct_of_baseline", hue="n", hue_order=sizes, col="panel",
                       col_wrap=min(2, rows["panel"].nunique()), kind="bar", palette="viridis", height=3.4,
                       aspect=1.9, sharex=False, sharey=True)
    grid.set_titles("{col_name}")
    grid.set_axis_labels("variant (the ladder, in file order)", "% of cuBLAS")
    for ax in grid.axes.flat:
        ax.axhline(100, color="black", linestyle="--", linewidth=1)
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
        ax.tick_params(axis="x", labelbottom=True)
    grid.figure.suptitle("What each rung buys: % of cuBLAS per variant and size", y=1.03)
    grid.figure.subplots_adjust(hspace=0.75)  # the rotated names of one row clear the titles of the next
    return grid.figure


def _finite(value) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def _roofline(ok: pd.DataFrame, devices: list[dict]) -> plt.Figure:
    if ok.empty:
        return placeholder("Roofline", "no successful benchmark points in this run")
    ok = ok.assign(intensity=ok["flops"] / ok["min_bytes"])
    # coloured by family: where each way of writing a GEMM sits under the ceilings (its variants: the other figures)
    grid = sns.relplot(data=ok, x="intensity", y="tflops", hue="family",
                       hue_order=baseline_first(ok), col="mode",
                       col_order=modes_in(ok), kind="scatter", height=3.8, aspect=1.25, facet_kws={"sharey": False})
    grid.set(xscale="log", yscale="log")
    grid.set_titles("{col_name}")
    grid.set_axis_labels("arithmetic intensity (FLOP/byte, minimum traffic)", "TFLOP/s")
    models = {d["gpu_uuid"]: d.get("gpu") for d in devices}
    devices = list({d["gpu"]: d for d in devices}.values())  # one set of ceilings per model
    named = len(devices) > 1  # name the device on each ceiling only when there are several
    for mode, ax in grid.axes_dict.items():
        panel = ok[ok["mode"] == mode]
        # a device's ceilings only in the panels that hold its points, over the intensities of those points
        here = set(panel["gpu_uuid"].map(models))
        # 1-2-5 ticks label ranges narrower than a decade; the default labelled minor ticks collide
        ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1, 2, 5)))
        ax.xaxis.set_major_formatter(ticker.StrMethodFormatter("{x:g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        hue_entries = len(ax.get_lines())
        for device, linestyle in zip(devices, itertools.cycle(["-", "--", "-.", ":"])):
            own = panel[panel["gpu_uuid"].map(models) == device.get("gpu")]
            if device.get("gpu") not in here or own.empty:
                continue
            intensities = np.geomspace(own["intensity"].min() / 2, own["intensity"].max() * 2, 64)
            suffix = f" ({device.get('gpu', '?')})" if named else ""
            peak = _finite((device.get("peak_tflops") or {}).get(mode))
            bandwidth = _finite(device.get("copy_bandwidth_gbps"))
            if peak is not None:
                ax.axhline(peak, color="black", linestyle=linestyle, linewidth=1,
                           label=f"peak {peak:.0f} TFLOP/s{suffix}")
            if bandwidth is not None:
                memory_bound = bandwidth * intensities / 1000  # GB/s × FLOP/byte → TFLOP/s
                if peak is not None:
                    memory_bound = np.minimum(memory_bound, peak)
                ax.plot(intensities, memory_bound, color="grey", linestyle=linestyle, linewidth=1,
                        label=f"copy bandwidth {bandwidth:.0f} GB/s{suffix}")
        _fit_log_axis(ax, panel["tflops"])
        best = panel["tflops"].max()
        ax.axhline(best, color="tab:red", linewidth=1.5, alpha=0.7,
                   label=f"measured compute ceiling {readable(best)} TFLOP/s")
        # the ceilings get a legend under each panel; the families already have the figure's legend
        ax.legend(handles=ax.get_lines()[hue_entries:], fontsize=7, loc="upper center",
                  bbox_to_anchor=(0.5, -0.2))
    grid.figure.suptitle("Roofline: achieved TFLOP/s vs arithmetic intensity", y=1.03)
    return grid.figure


def _error_units(rows: pd.DataFrame) -> pd.Series:
    """Each validation row's relative error as a multiple of the honest error of its mode and reduction length
    (measure/checking.py), from its shape: rows of tables older than the error_units column alike."""
    def units(row):
        workload = workloads.get(row.workload)
        k = workload.reduction({axis: int(getattr(row, axis)) for axis in workload.axes})
        return row.rel_error / checking.unit_error(row.mode, k)
    return pd.Series([units(row) for row in rows.itertuples()], index=rows.index, dtype=float)


def _validation_error(checked: pd.DataFrame) -> plt.Figure:
    """One panel per family (its variants told apart by colour, modes by marker fill, failures by a cross): each
    point's error in units of its mode's honest error, the bound of every mode dashed."""
    if checked.empty:
        return placeholder("Validation error", "no validation result with a measured error in this run")
    # exact results (error 0) would vanish from a log axis, so floor them
    checked = checked.assign(units=_error_units(checked).clip(lower=1e-3))

    def draw(ax, rows):
        modes = modes_in(rows)
        for series, points in rows.groupby("series"):
            colour, marker = _style(series)
            for (mode, passed), group in points.groupby(["mode", points["status"] == "ok"]):
                ax.scatter(group["size"], group["units"], s=28, color=colour, marker=marker if passed else "X",
                           facecolors=colour if mode == modes[0] else "none",
                           label=series.split("/", 1)[1] + (f" {mode}" if len(modes) > 1 else "")
                           + ("" if passed else " (fail)"))
        ax.axhline(checking.RMS_UNITS, color="tab:red", linestyle="--", linewidth=1)
        ax.annotate(f"bound ({checking.RMS_UNITS:g} units)", (0.98, checking.RMS_UNITS), ha="right",
                    xycoords=("axes fraction", "data"), color="tab:red", fontsize=7, va="bottom")
    return _family_grid(checked, draw, "Validation error vs size (fp64 reference), per family",
                        "‖C−R‖/‖R‖ in honest units of its mode", log=True)


def save(fig: plt.Figure, stem: Path) -> Path:
    """The figure as PNG (returned) and a reproducible SVG beside it, then closed."""
    png = stem.with_suffix(".png")
    fig.savefig(png, dpi=110, bbox_inches="tight")
    fig.savefig(stem.with_suffix(".svg"), bbox_inches="tight", metadata={"Date": None})  # reproducible SVG
    plt.close(fig)
    return png


def profile_stalls(profile: pd.DataFrame) -> plt.Figure:
    """Where each rung's warps wait (Nsight Compute's stall reasons, as shares of all stalls), along each ladder: one
    panel per family, mode and size, its variants in ladder order, the eight largest reasons of the whole table
    coloured and the rest grey."""
    from gemmbench.measure.ncu import STALLS

    ok = profile[profile["status"] == "ok"] if not profile.empty else profile
    if ok.empty:
        return placeholder("Warp stalls along the ladder", "no kernel profiled in this run")
    columns = [f"stall_{reason}" for reason in STALLS]
    shares = ok[columns].apply(pd.to_numeric, errors="coerce").fillna(0.0)
    largest = shares.sum().sort_values(ascending=False).index[:8]
    panels = list(ok.groupby(["family", "mode", "size"], sort=True))
    heights = [max(1.2, 0.32 * len(rows) + 0.8) for _, rows in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10.5, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    colours = dict(zip(largest, sns.color_palette("tab10", len(largest))))
    for ax, ((family, mode, size), rows) in zip(axes[:, 0], panels):
        rows = rows.sort_values(["variant", "kernel"])
        labels = [v if (rows["variant"] == v).sum() == 1 else f"{v}: {k[:30]}" for v, k in zip(rows["variant"],
                                                                                            rows["kernel"])]
        left = np.zeros(len(rows))
        part = shares.loc[rows.index]
        for column in [*largest, "other"]:
            values = (part[column] if column != "other" else part.drop(columns=list(largest)).sum(axis=1)).to_numpy()
            ax.barh(labels, values, left=left, color=colours.get(column, "0.8"),
                    label=column.removeprefix("stall_") if column != "other" else "other reasons")
            left += values
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_title(f"{family} · {mode} · {size}", loc="left", fontsize=10)
        ax.tick_params(axis="y", labelsize=8)
    axes[0, 0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    axes[-1, 0].set_xlabel("share of the warps' stalls (Nsight Compute, per issued instruction)")
    fig.suptitle("Where each rung's warps wait", x=0.02, ha="left", y=1.0)
    fig.tight_layout()
    return fig
