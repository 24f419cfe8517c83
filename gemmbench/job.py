"""The processes of the jobs on the run's serial GPU path (measure, profile, and a search's tune_trials and tune):
one per variant and mode, so they start lean. A shell command running this module imports no Snakemake (a `script:`
job's preamble does, a sixth of a second a job); the rule passes what Snakemake would have handed the script.

  python -m gemmbench.job measure --config JSON --log LOG --variant FAMILY/NAME --mode MODE
                                  --build BUILD.json --validation OUT.json --bench OUT.json
  python -m gemmbench.job profile --config JSON --log LOG --variant FAMILY/NAME --mode MODE
                                  --build BUILD.json --out OUT.json
  python -m gemmbench.job tune_trials --config JSON --log LOG --variant FAMILY/NAME --mode MODE --gpu GPU
                                      --out OUT.trials.json
  python -m gemmbench.job tune --config JSON --log LOG --variant FAMILY/NAME --mode MODE --gpu GPU
                               --out OUT.picked.json [--timed OUT.trials.json] [--holds-gpu N]
"""
from __future__ import annotations

import argparse
import json

# what each stage needs besides --config, --log, --variant and --mode
NEEDS = {"measure": ("build", "validation", "bench"), "profile": ("build", "out"), "tune_trials": ("gpu", "out"),
         "tune": ("gpu", "out")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gemmbench.job")
    parser.add_argument("stage", choices=list(NEEDS))
    parser.add_argument("--config", type=json.loads, required=True, help="stages/common.config_for's dict, as JSON")
    for name in ("log", "variant", "mode"):
        parser.add_argument(f"--{name}", required=True)
    for name in ("build", "validation", "bench", "out", "gpu"):
        parser.add_argument(f"--{name}")
    # the rule passes it always, empty where no tune_trials job timed the trials (Snakemake quotes "" as nothing)
    parser.add_argument("--timed", nargs="?", default="",
                        help="tune: the tune_trials job's file, where one timed the trials")
    parser.add_argument("--holds-gpu", type=int, default=0, help="tune: the GPUs the job holds (Snakemake's resource)")
    args = parser.parse_args(argv)
    missing = [f"--{name}" for name in NEEDS[args.stage] if not getattr(args, name)]
    if missing:
        parser.error(f"{args.stage} needs {' '.join(missing)}")
    from gemmbench import logs

    logs.setup(args.log)
    if args.stage == "measure":
        from gemmbench.stages import measure

        measure.run(args.config, args.variant, args.mode, args.build, args.validation, args.bench)
    elif args.stage == "profile":
        from gemmbench.stages import profile

        profile.run(args.config, args.variant, args.mode, args.build, args.out)
    elif args.stage == "tune_trials":
        from gemmbench.stages import tune

        tune.trials(args.config, args.variant, args.mode, args.gpu, args.out)
    else:
        from gemmbench.stages import tune

        tune.run(args.config, args.variant, args.mode, args.gpu, args.out, timed=args.timed or None,
                 holds_gpu=args.holds_gpu > 0)


if __name__ == "__main__":
    main()
