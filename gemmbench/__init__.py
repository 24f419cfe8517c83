"""gemmbench harness: planning, measuring, checking, tables, figures and the report.

The harness knows the Variant interface (kernels.registry), never a single kernel.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
