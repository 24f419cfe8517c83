"""Seaborn figures of the tidy tables, each written as PNG and SVG."""
from __future__ import annotations

import itertools
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: plots run in Snakemake jobs without a display
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import ticker

from gemmbench.present import views
from gemmbench.present.axes import log2_size_axis, modes_in, placeholder, readable
from gemmbench.present.tables import per_workload


def plot_all(summary: pd.DataFrame, validation: pd.DataFrame, devices: list[dict],
             outdir: Path, names=views.get("gemm").figures) -> dict[str, Path]:
    """Write the named figures (views.figure_name: each draws one workload's rows) into `outdir`; return
    {figure name: PNG path}."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    ok = _with_labels(summary[summary["status"] == "ok"].dropna(subset=["tflops"])
                      if not summary.empty else summary)
    checked = _with_labels(validation.dropna(subset=["rel_error"]) if not validation.empty else validation)
    drawn = {
        "tflops_vs_size": lambda ok, checked: _tflops_vs_size(ok),
        "pct_of_baseline": lambda ok, checked: _pct_of_baseline(ok),
        "ladder": lambda ok, checked: _ladder(ok),
        "roofline": lambda ok, checked: _roofline(ok, devices),
        "validation_error": lambda ok, checked: _validation_error(checked),
        **{name: (lambda ok, checked, make=make: make(ok))
           for view in views.VIEWS.values() for name, make in view.plots.items()},
    }
    figures = {}
    for name in names:
        workload, figure = views.figure_of(name)
        figures[name] = _save(drawn[figure](_of_workload(ok, workload), _of_workload(checked, workload)),
                              outdir / name)
    return figures


def _of_workload(df: pd.DataFrame, workload: str) -> pd.DataFrame:
    return df[df["workload"] == workload] if "workload" in df else df


def several_models(df: pd.DataFrame) -> pd.Series:
    """Rows of a device kind (cuda, cpu) that ran on more than one model here: their labels name the model."""
    return df.groupby("device")["gpu"].transform("nunique") > 1


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
                 columns: int = 3, log: bool = False, sharey: bool = True) -> plt.Figure:
    """One panel per family (the baseline's first), so that no panel holds more series than a reader can tell apart;
    `draw(ax, rows)` fills a panel with the family's rows and labels what it drew; each panel gets its own legend,
    above the data. `log`: a log y axis; with sharey=False each panel decides, where its values span a wide range."""
    families = baseline_first(df)
    columns = min(columns, len(families))
    rows = math.ceil(len(families) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 3.4 * rows), squeeze=False, sharey=sharey)
    for ax, family in zip(axes.flat, families):
        draw(ax, df[df["family"] == family])
        log2_size_axis(ax, df["size"])
        ax.set_title(family)
        ax.legend(fontsize=6.5, loc="upper left", ncol=2, frameon=False)
    for ax in axes.flat[:1] if sharey else axes.flat[:len(families)]:
        if log:
            ax.set_yscale("log")
        low, high = ax.get_ylim()
        ax.set_ylim(top=high * (high / low) ** 0.35 if ax.get_yscale() == "log" else high + 0.5 * (high - low))
    for ax in axes.flat[len(families):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel)
    fig.suptitle(title, y=1.01)
    fig.tight_layout()
    return fig


def baseline_first(df: pd.DataFrame) -> list[str]:
    """The families of `df`, the baseline's (role "baseline") first."""
    baseline = set(df.loc[df["role"] == "baseline", "family"]) if "role" in df else set()
    return sorted(df["family"].unique(), key=lambda family: (family not in baseline, family))


def _variant_lines(ax: plt.Axes, rows: pd.DataFrame, y: str) -> None:
    """One line per variant (colour) and mode (line style), labelled without the family's name."""
    modes = modes_in(rows)
    for colour, (series, points) in zip(itertools.cycle(sns.color_palette("tab10")), rows.groupby("series")):
        for mode, line in points.groupby("mode"):
            line = line.sort_values("size")
            ax.plot(line["size"], line[y], color=colour, linestyle=MODE_LINES.get(mode, ":"), marker="o",
                    markersize=3.5, label=series.split("/", 1)[1] + (f" {mode}" if len(modes) > 1 else ""))


def _tflops_vs_size(ok: pd.DataFrame) -> plt.Figure:
    if ok.empty:
        return placeholder("TFLOP/s vs size", "no successful benchmark points in this run")
    baseline = ok[ok["role"] == "baseline"]

    def draw(ax, rows):
        if not (rows["role"] == "baseline").any():  # the baseline, faint, in every other panel
            for (series, mode), line in baseline[baseline["mode"].isin(rows["mode"])].groupby(["series", "mode"]):
                line = line.groupby("size")["tflops"].max()
                ax.plot(line.index, line.values, color="0.6", linestyle=MODE_LINES.get(mode, ":"), linewidth=1,
                        label=f"{series} {mode}")
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
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)

    return _family_grid(compared, draw, "Speed relative to cuBLAS (same GPU, shape, mode), per family", "% of cuBLAS",
                        sharey=False)


def ladder_rows(ok: pd.DataFrame) -> pd.DataFrame:
    """Benchmarked (sweep) points of the families with several variants (their ladders), with a % of cuBLAS."""
    if ok.empty:
        return ok
    laddered = [name for name, view in views.VIEWS.items() if "ladder" in view.figures]
    ok = ok[(ok["role"] != "baseline") & ok["workload"].isin(laddered)].dropna(subset=["pct_of_baseline"])
    several = ok.groupby("family")["variant"].nunique()
    return ok[ok["family"].isin(several[several > 1].index)]


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
                       col_order=modes_in(ok), kind="scatter", height=3.8, aspect=1.25)
    grid.set(xscale="log", yscale="log")
    grid.set_titles("{col_name}")
    grid.set_axis_labels("arithmetic intensity (FLOP/byte, minimum traffic)", "TFLOP/s")
    intensities = np.geomspace(ok["intensity"].min() / 2, ok["intensity"].max() * 2, 64)
    devices = list({d["gpu"]: d for d in devices}.values())  # one set of ceilings per model
    named = len(devices) > 1  # name the device on each ceiling only when there are several
    for mode, ax in grid.axes_dict.items():
        # 1-2-5 ticks label ranges narrower than a decade; the default labelled minor ticks collide
        ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1, 2, 5)))
        ax.xaxis.set_major_formatter(ticker.StrMethodFormatter("{x:g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        hue_entries = len(ax.get_lines())
        for device, linestyle in zip(devices, itertools.cycle(["-", "--", "-.", ":"])):
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
        best = ok.loc[ok["mode"] == mode, "tflops"].max()
        ax.axhline(best, color="tab:red", linewidth=1.5, alpha=0.7,
                   label=f"measured compute ceiling {readable(best)} TFLOP/s")
        # the ceilings get a legend under each panel; the families already have the figure's legend
        ax.legend(handles=ax.get_lines()[hue_entries:], fontsize=7, loc="upper center",
                  bbox_to_anchor=(0.5, -0.2))
    grid.figure.suptitle("Roofline: achieved TFLOP/s vs arithmetic intensity", y=1.03)
    return grid.figure


def _validation_error(checked: pd.DataFrame) -> plt.Figure:
    """One panel per family (its variants told apart by colour, modes by marker fill, failures by a cross); the
    tolerance of each mode dashed."""
    if checked.empty:
        return placeholder("Validation error", "no validation result with a measured error in this run")
    # exact results (error 0) would vanish from a log axis, so floor them at float64 epsilon
    checked = checked.assign(rel_error=checked["rel_error"].clip(lower=np.finfo(float).eps))

    def draw(ax, rows):
        modes = modes_in(rows)
        for colour, (series, points) in zip(itertools.cycle(sns.color_palette("tab10")), rows.groupby("series")):
            for (mode, passed), group in points.groupby(["mode", points["status"] == "ok"]):
                ax.scatter(group["size"], group["rel_error"], s=28, color=colour, marker="o" if passed else "X",
                           facecolors=colour if mode == modes[0] else "none",
                           label=series.split("/", 1)[1] + (f" {mode}" if len(modes) > 1 else "")
                           + ("" if passed else " (fail)"))
        for mode in modes:
            for tolerance in rows.loc[rows["mode"] == mode, "tolerance"].dropna().unique():
                ax.axhline(tolerance, color="tab:red", linestyle="--", linewidth=1)
                ax.annotate(f"{mode} tolerance {tolerance:.0e}", (0.98, tolerance), ha="right",
                            xycoords=("axes fraction", "data"), color="tab:red", fontsize=7, va="bottom")
    return _family_grid(checked, draw, "Validation error vs size (fp64 reference), per family",
                        "relative error ‖C−R‖/‖R‖", log=True)


def _save(fig: plt.Figure, stem: Path) -> Path:
    png = stem.with_suffix(".png")
    fig.savefig(png, dpi=110, bbox_inches="tight")
    fig.savefig(stem.with_suffix(".svg"), bbox_inches="tight", metadata={"Date": None})  # reproducible SVG
    plt.close(fig)
    return png
