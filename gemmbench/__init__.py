"""gemmbench harness: planning, measuring, checking, tables, figures and the report.

The harness knows the Variant interface (kernels.registry), never a single kernel.
"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def path_with(root) -> str:
    """PYTHONPATH with `root` first: a process started with it imports this checkout's gemmbench and kernels."""
    return os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))


def first_on_path(root) -> None:
    """Processes started from here (Snakemake's jobs) import from `root` first: Snakemake appends its search path to a
    script job's, so a PYTHONPATH naming another checkout would otherwise win there. A shell job's `python` is this
    process's interpreter, as Snakemake picks it for a script (where jobs run in an environment of their own, --sdm
    conda, its interpreter comes first on the job's PATH)."""
    os.environ["PYTHONPATH"] = path_with(root)
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
