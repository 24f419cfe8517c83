"""The processes of the jobs on the run's serial GPU path (measure, profile): one per variant and mode, so they start
lean. A shell command running this module imports no Snakemake (a `script:` job's preamble does, a sixth of a second
a job); the rule passes what Snakemake would have handed the script.

  python -m gemmbench.job measure --config JSON --log LOG --variant FAMILY/NAME --mode MODE
                                  --build BUILD.json --validation OUT.json --bench OUT.json
  python -m gemmbench.job profile --config JSON --log LOG --variant FAMILY/NAME --mode MODE
                                  --build BUILD.json --out OUT.json
"""
from __future__ import annotations

import argparse
import json


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gemmbench.job")
    parser.add_argument("stage", choices=["measure", "profile"])
    parser.add_argument("--config", type=json.loads, required=True, help="stages/common.config_for's dict, as JSON")
    for name in ("log", "variant", "mode", "build"):
        parser.add_argument(f"--{name}", required=True)
    for name in ("validation", "bench", "out"):  # measure's outputs; profile's
        parser.add_argument(f"--{name}")
    args = parser.parse_args(argv)
    from gemmbench import logs

    logs.setup(args.log)
    if args.stage == "measure":
        from gemmbench.stages import measure

        measure.run(args.config, args.variant, args.mode, args.build, args.validation, args.bench)
    else:
        from gemmbench.stages import profile

        profile.run(args.config, args.variant, args.mode, args.build, args.out)


if __name__ == "__main__":
    main()
