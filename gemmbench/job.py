"""The measure job's process: the run's serial GPU path starts one per variant and mode, so it starts lean. A shell
command running this module imports no Snakemake (a `script:` job's preamble does, a sixth of a second a job); the
rule passes what Snakemake would have handed the script.

  python -m gemmbench.job measure --config JSON --log LOG --variant FAMILY/NAME --mode MODE
                                  --build BUILD.json --validation OUT.json --bench OUT.json
"""
from __future__ import annotations

import argparse
import json


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gemmbench.job")
    parser.add_argument("stage", choices=["measure"])
    parser.add_argument("--config", type=json.loads, required=True, help="stages.config_for's dict, as JSON")
    for name in ("log", "variant", "mode", "build", "validation", "bench"):
        parser.add_argument(f"--{name}", required=True)
    args = parser.parse_args(argv)
    from gemmbench import logs, stages

    logs.setup(args.log)
    stages.measure(args.config, args.variant, args.mode, args.build, args.validation, args.bench)


if __name__ == "__main__":
    main()
