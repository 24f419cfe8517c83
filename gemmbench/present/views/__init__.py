"""How a workload is shown, apart from what it computes (gemmbench/workloads): a view is one module of this package
(gemm.py, b2b.py) defining VIEW, named as its workload: its figures, where a shape sits on their size axis, its
derived columns and its report sections. A workload registered outside the harness registers its view beside it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from gemmbench.plugins import Plugins


@dataclass(frozen=True)
class View:
    name: str  # its workload's
    figures: tuple[str, ...]  # the report's figures for a run of this workload, in reading order
    compared: tuple[str, ...]  # those of them that compare with the baseline: drawn only where it runs
    position: Callable[[dict], object]  # (sizes) -> where a shape sits on the figures' size axis
    speedups: bool = False  # derived columns: speedups over the baseline and over the fastest unfused variant
    plots: Mapping[str, Callable] = field(default_factory=dict)  # its own figures: name -> (ok rows) -> Figure
    sections: Callable[[object, list], list[dict]] | None = None  # (summary, devices) -> its report tables


VIEWS = Plugins("has no view", "the module that registers a workload registers its view, "
                                "gemmbench.present.views.register")
register, get = VIEWS.register, VIEWS.get
VIEWS.load_package(__name__, __path__, "VIEW")


SHARED = ("ladder", "tflops_vs_size", "pct_of_baseline", "roofline", "validation_error")  # drawn for any workload


def figure_name(workload: str, figure: str) -> str:
    """A figure's file name: gemm's shared figures keep their own names; another workload's are named after it
    (b2b_roofline), so that each workload of a run gets its own; a view's own figure is named as its view names it."""
    return figure if workload == "gemm" or figure not in SHARED else f"{workload}_{figure}"


def figure_of(name: str) -> tuple[str, str]:
    """(workload, figure) of a figure's file name (figure_name's inverse)."""
    for workload, view in VIEWS.items():
        if name in view.plots:
            return workload, name
        if name.startswith(f"{workload}_") and name[len(workload) + 1:] in SHARED:
            return workload, name[len(workload) + 1:]
    return "gemm", name


def figures(workloads: list[str], variants) -> list[str]:
    """The report's figures for a plan of these workloads, in their order: each workload's view's, those that compare
    with the baseline only where it runs (a CPU-only run would draw them empty)."""
    names = []
    for workload in workloads:
        running = [v for v in variants if v.workload == workload]
        view = get(workload)
        with_baseline = any(v.role == "baseline" for v in running)
        names += [figure_name(workload, name) for name in view.figures
                  if running and (with_baseline or name not in view.compared)]
    return names


def workloads_in(summary) -> list[str]:
    """The workloads a summary table's rows compute, in their order (gemm for a table without rows)."""
    return list(dict.fromkeys(summary["workload"])) or ["gemm"]


def figures_of(summary) -> list[str]:
    """The report's figures for the rows of a summary table (a report rendered again from its tables)."""
    return figures(workloads_in(summary), list(summary[["workload", "role"]].drop_duplicates().itertuples()))
