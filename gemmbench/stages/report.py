"""The report stage: one self-contained HTML file from the run's tables and figures."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd

from gemmbench import configuration
from gemmbench.configuration import ConfigError
from gemmbench.present import tables, time_spent
from gemmbench.present.methodology import methodology
from gemmbench.present.report import render_report
from gemmbench.stages.common import tables_of


def run(config: dict, tables_dir, pngs: list, out) -> None:
    """The report, with the figures `pngs` (the plot rule's outputs) in their order."""
    t = tables_of(tables_dir)
    _render({**t, "profile": t["profile"] if config["profile"]["enabled"] else None}, Path(tables_dir),
            {Path(png).stem: Path(png) for png in pngs}, Path(out), config, config["compare_with"],
            Path(tables_dir).parent)


def from_tables(folder: Path, out: Path, config_path: str, compare: str | None = None, results: Path | None = None,
                notices: tuple = ()) -> None:
    """The report rendered again from a folder of tables (summary.csv, validation.csv, devices.json, and builds.csv,
    samples.parquet or .csv, profile.csv where present), its figures drawn anew; the time section read from `results`
    (default: the folder's parent, as results/tables is results/'s), `notices` said first."""
    from gemmbench.present import plots, views  # the figures: matplotlib, which the report rule's job never loads

    missing = [name for name in ("summary.csv", "validation.csv", "devices.json") if not (folder / name).exists()]
    if missing:
        raise ConfigError(f"{folder}: no {', '.join(missing)} (a folder of gemmbench tables, e.g. results/tables)")
    summary, validation = (tables.read(folder / f"{name}.csv") for name in ("summary", "validation"))
    if (folder / "samples.parquet").exists():
        summary = tables.with_spread(summary, pd.read_parquet(folder / "samples.parquet"))
    t = {"summary": summary, "validation": validation,
         "builds": pd.read_csv(folder / "builds.csv") if (folder / "builds.csv").exists() else pd.DataFrame(),
         "devices": json.loads((folder / "devices.json").read_text()),
         "profile": pd.read_csv(folder / "profile.csv") if (folder / "profile.csv").exists() else None}
    names = views.figures_of(summary)  # tables.read names gemm where older tables name no workload
    cfg = configuration.validate({**configuration.load(config_path), "workloads": views.workloads_in(summary)})
    with tempfile.TemporaryDirectory(prefix="gemmbench-report-") as tmp:
        figures = plots.plot_all(summary, validation, t["devices"], Path(tmp), names)
        _render(t, folder, figures, out, cfg, compare, results or folder.parent, notices)


def _render(t: dict, tables_dir: Path, figures: dict, out: Path, config: dict, compare: str | None, results: Path,
            notices: tuple = ()) -> None:
    """The report of the tables `t` (tables_of's keys) read from `tables_dir`, with `figures` by name, compared with
    the summary.csv at `compare` where one is named, its time section read from `results`."""
    render_report(summary=t["summary"], validation=t["validation"], builds=t["builds"],
                  samples_csv=tables_dir / "samples.csv", summary_csv=tables_dir / "summary.csv",
                  devices=t["devices"], figures=figures, out_html=out, methodology=methodology(config, t["devices"]),
                  compared_with=(compare, tables.read(compare)) if compare else None, profile=t["profile"],
                  time=time_spent.of_run(t["summary"], t["validation"], results), notices=notices)
