"""The linters CI runs: ruff (pyproject.toml) on the Python, snakefmt on the Snakefile and rules (snakemake --lint is
tests/test_pipeline.py::test_lint)."""
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

BIN = Path(sys.executable).parent


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_snakefile_and_rules_are_formatted_by_snakefmt():
    files = ["Snakefile", *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "workflow/rules").glob("*.smk")))]
    result = subprocess.run([str(BIN / "snakefmt"), "--check", *files], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
