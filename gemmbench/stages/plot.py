"""The plot stage: the report's figures from the run's tables. A figure takes seconds to draw and save and the report
waits for them all, after the last measure job: where the job has several cores, the tables are read and the plotting
libraries imported once, and each figure is drawn by a process forked from this one, which skips both (seconds per
figure in a fresh interpreter)."""
from __future__ import annotations

import logging
import multiprocessing
import time
from pathlib import Path

from gemmbench.present.plots import plot_all
from gemmbench.stages.common import tables_of

log = logging.getLogger("gemmbench")

_TABLES: dict = {}  # the tables a forked process draws from: read once, before the fork


def _draw(png) -> dict:
    start = time.perf_counter()
    drawn = plot_all(_TABLES["summary"], _TABLES["validation"], _TABLES["devices"], Path(png).parent,
                     [Path(png).stem])
    log.info("figure %s: %.1f s", Path(png).stem, time.perf_counter() - start)
    return drawn


def run(tables_dir, pngs: list, workers: int = 1) -> dict:
    """The figures named by their PNG paths (the plot rule's outputs; SVGs beside them), `workers` at a time."""
    _TABLES.update(tables_of(tables_dir))
    if workers <= 1 or len(pngs) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return {name: path for png in pngs for name, path in _draw(png).items()}
    with multiprocessing.get_context("fork").Pool(min(workers, len(pngs))) as pool:
        return {name: path for drawn in pool.map(_draw, pngs, chunksize=1) for name, path in drawn.items()}
