"""The plot stage: the report's figures from the run's tables."""
from __future__ import annotations

from pathlib import Path

from gemmbench.present.plots import plot_all
from gemmbench.stages.common import tables_of


def run(tables_dir, pngs: list) -> dict:
    """The figures named by their PNG paths (the plot rule's outputs; SVGs beside them)."""
    t = tables_of(tables_dir)
    return plot_all(t["summary"], t["validation"], t["devices"], Path(pngs[0]).parent, [Path(p).stem for p in pngs])
