"""gemmbench harness: planning, measuring, checking, tables, figures and the report.

The harness knows the Variant interface (kernels.registry), never a single kernel.
"""
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def first_on_path(root) -> None:
    """Processes started from here (Snakemake's script jobs) import from `root` first: Snakemake appends its search
    path to a job's, so a PYTHONPATH naming another checkout would otherwise win there."""
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
