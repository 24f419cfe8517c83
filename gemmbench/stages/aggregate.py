"""The aggregate stage: every job's rows as tidy tables (CSV and Parquet) in results/tables/, and the devices they
ran on; the profile stage's rows as a table of their own."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from gemmbench.present import tables


def run(*, build_paths, validation_paths, bench_paths, outdir, device_reason: str = "") -> dict[str, pd.DataFrame]:
    """Write results/tables/{summary,samples,validation,builds}.{csv,parquet} and devices.json."""
    facts = tables.devices([*validation_paths, *bench_paths], device_reason)
    bench_rows = tables.read_rows(bench_paths)
    frames = {
        "summary": tables.summary_table(bench_rows, facts),
        "samples": tables.samples_table(bench_rows),
        "validation": tables.typed_frame(tables.read_rows(validation_paths), "validation"),
        "builds": tables.typed_frame([tables.plain(json.loads(Path(p).read_text())) for p in build_paths], "builds"),
    }
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.items():
        frame.to_csv(outdir / f"{name}.csv", index=False)
        # zstd: the samples (half a million rows for the default run) ride in the report as a download
        frame.to_parquet(outdir / f"{name}.parquet", index=False, compression="zstd")
    (outdir / "devices.json").write_text(json.dumps(facts, indent=1))
    return frames


def profile_table(paths, csv_path, parquet_path) -> pd.DataFrame:
    """results/tables/profile.{csv,parquet}: the profile stage's rows, one per kernel profiled (or per shape without
    one, saying why)."""
    frame = tables.typed_frame(tables.read_rows(paths), "profile")
    frame.to_csv(csv_path, index=False)
    frame.to_parquet(parquet_path, index=False)
    return frame
