"""The report of a run still going (or stopped): what its results/ holds so far, aggregated and rendered as the run's
own report is, and saying first that it is a snapshot. A first run on a new GPU model searches for minutes before
most variants are measured; this shows the rows measured so far meanwhile (`python -m gemmbench so-far`)."""
from __future__ import annotations

import tempfile
from datetime import datetime, timezone
from pathlib import Path

from gemmbench.configuration import ConfigError
from gemmbench.stages import aggregate, report


def found(results: Path) -> tuple[list[Path], list[Path], list[Path], int]:
    """The build, validation and timing files of every variant-mode built so far: a finished measure job's, or, for
    one still measuring (or stopped), the timed points it has kept one by one (stages/measure.py), without their
    validation rows, which it writes at its end. Also how many variant-modes are there only in part."""
    builds, validations, benches, in_part = [], [], [], 0
    for build in sorted(results.glob("build/*/*/*.json")):
        family, variant, mode = build.parts[-3], build.parts[-2], build.stem
        bench, validation = (results / stage / family / variant / f"{mode}.json" for stage in ("bench", "validate"))
        points = sorted((results / "bench" / family / variant / mode).glob("*.json"))
        if bench.exists() and validation.exists():
            builds.append(build)
            validations.append(validation)
            benches.append(bench)
        elif points:
            builds.append(build)
            benches += points
            in_part += 1
    return builds, validations, benches, in_part


def run(results: Path, out: Path, config_path: str) -> str:
    """The report of what `results` holds so far, written to `out`; returns what it says first."""
    builds, validations, benches, in_part = found(results)
    if not benches:
        raise ConfigError(f"{results}: no timed point yet (results/bench/ holds none; the run's first rows come "
                          f"after its first build)")
    said = (f"A snapshot of a run that was still going or was stopped, taken "
            f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')}. Measured so far: {len(validations)} "
            f"variant-modes" + (f", and {in_part} more in part (their points timed so far, without their validation "
                                f"rows)" if in_part else "")
            + ". What the run has not measured yet is not here; its own report, at its end, has every planned point.")
    with tempfile.TemporaryDirectory(prefix="gemmbench-so-far-") as tables_dir:
        aggregate.run(build_paths=builds, validation_paths=validations, bench_paths=benches, outdir=tables_dir)
        out.parent.mkdir(parents=True, exist_ok=True)
        report.from_tables(Path(tables_dir), out, config_path, results=results, notices=(said,))
    return said
