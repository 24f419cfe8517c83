"""Command line: debug one variant at one size, list variants, compare two runs.

  python -m gemmbench list
  python -m gemmbench run cublas/gemm --mode fp32 --size 4096 [--shape 1000x999x1001] [--cache cold]
  python -m gemmbench run cpu/b2b_unfused_numpy-blas --shape 4096x64x128x64
  python -m gemmbench compare RUN_A/summary.csv RUN_B/summary.csv [--min-size 1024]
  python -m gemmbench report reports/examples/h100 --out report.html
  python -m gemmbench so-far [--results results] [--out reports/so-far.html]
  python -m gemmbench tuning-check
  python -m gemmbench tuning-migrate
"""
from __future__ import annotations

import argparse
import logging
import re
import sys
import tempfile
from pathlib import Path

from gemmbench import configuration, logs, plan, workloads
from gemmbench.configuration import ConfigError
from gemmbench.stages import build, measure
from gemmbench.tuning import records
from kernels import registry


def cmd_list(args) -> int:
    cfg = configuration.load(args.config)
    for key, v in sorted(registry.load(cfg["variant_modules"]).items()):
        print(f"{key:28s} {v.device:5s} {','.join(v.modes):14s} {dict(v.params) or ''}  {v.description}")
    return 0


def cmd_run(args) -> int:
    """Build, validate and time one point through the same stages (and watchdog) as the pipeline."""

    cfg = configuration.load(args.config)
    known = registry.load(cfg["variant_modules"])
    if args.variant not in known:
        raise ConfigError(f"unknown variant {args.variant!r}; `python -m gemmbench list` names them")
    if args.mode not in known[args.variant].modes:
        raise ConfigError(f"--mode {args.mode}: {args.variant} runs in {', '.join(known[args.variant].modes)}")
    workload = known[args.variant].workload
    if args.shape:
        try:
            shape = plan.Shape.parse(args.shape, workload)
        except ValueError as exc:
            raise ConfigError(f"--shape: {exc}") from None
    else:  # every axis --size
        shape = plan.Shape.of(workload, (args.size,) * len(workloads.get(workload).axes))
    sizes = shape.sizes
    overrides = {"workloads": [workload], "families": [args.variant.split("/")[0]], "variants": [args.variant],
                 "modes": [args.mode], "max_size": {}, "cache": args.cache, **workloads.get(workload).just(sizes)}
    cfg = configuration.validate({**cfg, **overrides})
    device, reason = plan.resolve_device(cfg["device"])
    variants = {v.key: v for v in plan.variants(cfg, device)}
    if args.variant not in variants:
        raise ConfigError(f"{args.variant} cannot run here (device {device}{': ' + reason if reason else ''})")
    path, tuning = None, None
    if device == "cuda" and plan.tuned(cfg, variants[args.variant]):  # as the pipeline: the committed tuning's kernels
        gpu = plan.gpu_model(cfg)
        path, tuning = records.committed(cfg["tune"], variants[args.variant], args.mode, gpu)
        print(f"{args.variant} {args.mode}: " + (f"the tuned parameters of {path}" if tuning else
              f"no current committed tuning for {gpu} ({path}): its default parameters, where the pipeline's tune "
              f"stage would search first"), file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="gemmbench-run-") as tmp:
        tmp = Path(tmp)
        build.run(cfg, args.variant, args.mode, tmp / "build.json", path if tuning else None)
        row = measure.run(cfg, args.variant, args.mode, tmp / "build.json", tmp / "validate.json",
                          tmp / "bench.json")[1][0]
    flops = workloads.get(workload).flops(sizes)
    print(f"{args.variant} {args.mode} {shape.label}: {row['status']} ({row['message']})")
    if row["status"] == "ok":
        print(f"  device median {row['median_s'] * 1e3:.4f} ms  ({flops / row['median_s'] / 1e12:.2f} TFLOP/s), "
              f"host median {row['host_median_s'] * 1e3:.4f} ms, {row['samples']} samples, "
              f"rel error {row['rel_error']:.3g}, throttled: {row['throttled']} {row.get('throttle_reasons') or ''}")
        print(f"  timing gate: {row['timing_gate']}")
    return 0 if row["status"] == "ok" else 1


def cmd_tuning_check(args) -> int:
    """Whether every committed tuning record still stands for the code it timed (no GPU, no compiler needed)."""
    root = Path(args.root) if args.root else records.COMMITTED
    found = records.stale(root)
    count = len(records.record_paths(root))
    for line in found:
        print(f"stale: {line}")
    print(f"{count - len(found)} of {count} committed tuning records stand for the current code")
    return 1 if found else 0


def cmd_tuning_migrate(args) -> int:
    """Re-key the stale committed records whose winners compile to the code they were timed as (no GPU)."""
    root = Path(args.root) if args.root else records.COMMITTED
    try:
        said = records.migrate(root, args.since)
    except ValueError as bad:
        print(f"tuning-migrate: {bad}", file=sys.stderr)
        return 2
    for line in said:
        print(line)
    left = len(records.stale(root))
    print(f"{sum('migrated' in line for line in said)} records migrated; {left} stale (the tune stage searches those)")
    return 1 if left else 0


def cmd_check_config(args) -> int:
    """The config a run would get, checked against the whole schema before Snakemake reads it (its errors are
    tracebacks): the default config file, each file over it, then each `--config KEY=VALUE` over those, as
    Snakemake merges them (run.sh asks this first)."""
    merged = configuration.read(args.default) if args.default else {}
    for path in args.files:
        merged = configuration.merged(merged, configuration.read(path))
    for item in args.config or ():
        merged = configuration.merged(merged, configuration.command_line(item))
    validated = configuration.validate(merged)
    logger = logging.getLogger("gemmbench")
    level = logger.level
    logger.setLevel(logging.ERROR)  # what the plan warns of is said again when the run plans
    try:
        plan.variants(validated, "cpu")  # what the schema cannot know: the registered workloads, families, variants
    finally:
        logger.setLevel(level)
    return 0


def cmd_compare(args) -> int:
    """Per-point agreement of two runs' median device times (same GPU model, variant, mode, shape); where the
    runs measured a point on two different GPUs of the model (UUIDs), that agreement is also given apart."""
    from gemmbench.present import tables

    def summary(path: str):
        """A summary table, or the folder of tables (or the example) that holds summary.csv."""
        found = Path(path) / "summary.csv" if Path(path).is_dir() else Path(path)
        if not found.is_file():
            raise ConfigError(f"{path}: no summary table (give a summary.csv or a folder with one, e.g. "
                              f"results/tables)")
        return tables.read(found)

    both = tables.compare(summary(args.a), summary(args.b), args.min_size)
    print(both.drop(columns=["gpu_uuid_a", "gpu_uuid_b"]).to_string(index=False, float_format=lambda x: f"{x:.6g}"))

    def spread(points) -> str:
        return (f"{len(points)} points: largest |difference| {points.diff_pct.abs().max():.2f}%, "
                f"median |difference| {points.diff_pct.abs().median():.2f}%")

    print(f"\nsmallest size >= {args.min_size}, {spread(both)}")
    if not both.same_gpu.all():
        print(f"  measured on two different GPUs: {spread(both[~both.same_gpu])}")
        print(f"  measured on the same GPU:       {spread(both[both.same_gpu])}")
    return 0 if both.diff_pct.abs().max() <= args.tolerance_pct else 1


def cmd_report(args) -> int:
    """Render the report again from a folder of tables (results/tables, or an example under reports/examples/):
    summary.csv, validation.csv, devices.json, and builds.csv, samples.parquet or .csv, profile.csv where present."""
    from gemmbench.stages import report

    report.from_tables(Path(args.tables), Path(args.out), args.config, args.compare)
    print(f"wrote {args.out}")
    return 0


def cmd_so_far(args) -> int:
    """The report of a run still going, or stopped: what its results/ holds so far (stages/so_far.py)."""
    from gemmbench.stages import so_far

    print(so_far.run(Path(args.results), Path(args.out), args.config))
    print(f"wrote {args.out}")
    return 0


def positive_int(text: str) -> int:
    if not re.fullmatch(r"\d+", text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def shape_text(text: str) -> str:
    if not re.fullmatch(r"\d+(x\d+)+", text) or any(int(x) < 1 for x in text.split("x")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape: positive sizes joined by x, e.g. 1000x999x1001")
    return text


def _attach_values(argv: list[str]) -> list[str]:
    """`--shape -1x2x3` would reach argparse as two options; joined as `--shape=-1x2x3`, its value is checked."""
    out, rest = [], list(argv)
    while rest:
        arg = rest.pop(0)
        if arg in ("--shape", "--size") and rest and rest[0].startswith("-"):
            arg = f"{arg}={rest.pop(0)}"
        out.append(arg)
    return out


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line naming the flag and the value, not the usage block
        self.exit(2, f"error: {message}\n")


def main(argv=None) -> int:
    parser = Parser(prog="python -m gemmbench", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(Path(__file__).resolve().parents[1] / "config" / "config.yaml"))
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    sub.add_parser("list", help="registered variants").set_defaults(func=cmd_list)
    run = sub.add_parser("run", help="build, validate and time one variant at one size")
    run.add_argument("variant", help="family/name, e.g. cublas/gemm (see `list`)")
    run.add_argument("--mode", default="fp32", choices=registry.MODES)
    run.add_argument("--size", type=positive_int, default=1024, help="every axis of the shape (default 1024)")
    run.add_argument("--shape", type=shape_text, help="MxNxK instead of --size (b2b variants: MxK0xN0xN1)")
    run.add_argument("--cache", default="hot", choices=["hot", "cold"])
    run.set_defaults(func=cmd_run)
    tuning = sub.add_parser("tuning-check", help="whether every committed tuning record stands for the current code")
    tuning.add_argument("--root", help="a folder of records laid out as resources/tuning (default: that one)")
    tuning.set_defaults(func=cmd_tuning_check)
    migrate = sub.add_parser("tuning-migrate", help="re-key stale committed records whose code compiles the same")
    migrate.add_argument("--root", help="a folder of records laid out as resources/tuning (default: that one)")
    migrate.add_argument("--since", help="a git revision the records stood for: re-key those whose winners compile "
                                         "here to the same code then and now, where their digests are another host's")
    migrate.set_defaults(func=cmd_tuning_migrate)
    check = sub.add_parser("check-config", help="the config a run would get, checked against the whole schema")
    check.add_argument("files", nargs="*", help="config files, each over the one before (snakemake --configfile)")
    check.add_argument("--default", default=str(Path(__file__).resolve().parents[1] / "config" / "config.yaml"),
                       help="the config the files extend (default: config/config.yaml; empty: none)")
    check.add_argument("--config", nargs="*", metavar="KEY=VALUE", help="as snakemake --config gives them")
    check.set_defaults(func=cmd_check_config)
    compare = sub.add_parser("compare", help="per-point agreement of two summary.csv files")
    compare.add_argument("a")
    compare.add_argument("b")
    compare.add_argument("--min-size", type=int, default=1024)
    compare.add_argument("--tolerance-pct", type=float, default=2.0, help="exit 1 if any point differs more")
    compare.set_defaults(func=cmd_compare)
    report = sub.add_parser("report", help="render the report again from a folder of tables")
    report.add_argument("tables", help="e.g. results/tables or reports/examples/h100")
    report.add_argument("--out", default="report.html")
    report.add_argument("--compare", help="another run's summary.csv: a section on what got faster or slower")
    report.set_defaults(func=cmd_report)
    so_far = sub.add_parser("so-far", help="the report of a run still going: what results/ holds so far")
    so_far.add_argument("--results", default="results", help="the run's results folder (default: results)")
    so_far.add_argument("--out", default="reports/so-far.html")
    so_far.set_defaults(func=cmd_so_far)
    args = parser.parse_args(_attach_values(sys.argv[1:] if argv is None else argv))
    logs.setup()
    try:
        return args.func(args)
    except ConfigError as exc:  # one line: what is wrong, where
        print("error: " + " ".join(str(exc).split()), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
