"""The plot stage: the report's figures from the run's tables. A figure takes seconds to draw and save and the report
waits for them all, so where the job has several cores each figure is drawn by a process of its own:

  python -m gemmbench.stages.plot TABLES_DIR PNG... [--log LOG] [--variant-modules MODULE...]
"""
from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gemmbench.present.plots import plot_all
from gemmbench.stages.common import tables_of

log = logging.getLogger("gemmbench")


def run(tables_dir, pngs: list, workers: int = 1, log_path: str | None = None, variant_modules=()) -> dict:
    """The figures named by their PNG paths (the plot rule's outputs; SVGs beside them), `workers` at a time (each
    a fresh interpreter that logs to `log_path` and imports `variant_modules`, which may register workloads)."""
    if workers <= 1 or len(pngs) <= 1:
        t = tables_of(tables_dir)
        return plot_all(t["summary"], t["validation"], t["devices"], Path(pngs[0]).parent,
                        [Path(p).stem for p in pngs])

    def draw(png):
        command = [sys.executable, "-m", "gemmbench.stages.plot", str(tables_dir), str(png),
                   *(["--log", str(log_path)] if log_path else []), "--variant-modules", *variant_modules]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"figure {Path(png).stem}: {done.stderr.strip()[-2000:]}")
        log.info("figure %s: %.1f s (its process: imports, tables, drawing, saving)", Path(png).stem,
                 time.perf_counter() - start)
        return Path(png).stem, Path(png)

    with ThreadPoolExecutor(workers) as pool:
        return dict(pool.map(draw, pngs))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gemmbench.stages.plot")
    parser.add_argument("tables_dir")
    parser.add_argument("pngs", nargs="+")
    parser.add_argument("--log")
    parser.add_argument("--variant-modules", nargs="*", default=[])
    args = parser.parse_args(argv)
    from gemmbench import logs
    from kernels import registry

    logs.setup(args.log)
    registry.load(args.variant_modules)
    run(args.tables_dir, args.pngs)


if __name__ == "__main__":
    main()
