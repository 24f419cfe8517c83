"""The report stage: one self-contained HTML file from the run's tables and figures."""
from __future__ import annotations

from pathlib import Path

from gemmbench.present import tables, time_spent
from gemmbench.present.methodology import methodology
from gemmbench.present.report import render_report
from gemmbench.stages.common import tables_of


def run(config: dict, tables_dir, pngs: list, out) -> None:
    """The report, with the figures `pngs` (the plot rule's outputs) in their order."""
    t = tables_of(tables_dir)
    figures = {Path(png).stem: Path(png) for png in pngs}
    other = config["compare_with"]
    render_report(summary=t["summary"], validation=t["validation"], builds=t["builds"],
                  samples_csv=Path(tables_dir) / "samples.csv", summary_csv=Path(tables_dir) / "summary.csv",
                  devices=t["devices"], figures=figures, out_html=Path(out),
                  methodology=methodology(config, t["devices"]),
                  compared_with=(other, tables.read(other)) if other else None,
                  profile=t["profile"] if config["profile"]["enabled"] else None,
                  time=time_spent.of_run(t["summary"], t["validation"], Path(tables_dir).parent))
