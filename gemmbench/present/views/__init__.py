"""How a workload is shown, apart from what it computes (gemmbench/workloads): a view is one module of this package
(gemm.py, b2b.py) defining VIEW, named as its workload: its figures, where a shape sits on their size axis, its
derived columns and its report sections. A workload registered outside the harness registers its view beside it."""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable, Mapping


@dataclass(frozen=True)
class View:
    name: str  # its workload's
    figures: tuple[str, ...]  # the report's figures for a run of this workload, in reading order
    compared: tuple[str, ...]  # those of them that compare with the baseline: drawn only where it runs
    position: Callable[[dict], object]  # (sizes) -> where a shape sits on the figures' size axis
    speedups: bool = False  # derived columns: speedups over the baseline and over the fastest unfused variant
    plots: Mapping[str, Callable] = field(default_factory=dict)  # its own figures: name -> (ok rows) -> Figure
    sections: Callable[[object, list], list[dict]] | None = None  # (summary, devices) -> its report tables


VIEWS: dict[str, View] = {}


def register(view: View) -> View:
    VIEWS[view.name] = view
    return view


for _module in pkgutil.iter_modules(__path__):
    register(importlib.import_module(f"{__name__}.{_module.name}").VIEW)


def get(name: str) -> View:
    if name not in VIEWS:
        raise KeyError(f"workload {name!r} has no view ({sorted(VIEWS)}; the module that registers a workload "
                       f"registers its view, gemmbench.present.views.register)")
    return VIEWS[name]


def figures(config: dict, variants) -> list[str]:
    """The report's figures for this plan: those that compare with cuBLAS only where it runs (a CPU-only run would
    draw them empty)."""
    view = get(config["workload"])
    with_baseline = any(v.role == "baseline" for v in variants)
    return [name for name in view.figures if with_baseline or name not in view.compared]
