"""The timing settings of every config the project ships, and the tune stage's: the negative controls must be caught
under each."""
from pathlib import Path

import yaml

from gemmbench import configuration

CONFIGS = Path(__file__).resolve().parents[1] / "config"


def shipped() -> dict[str, dict]:
    timings = {name: configuration.validate(yaml.safe_load((CONFIGS / f"{name}.yaml").read_text()))["timing"]
               for name in ("config", "test", "cpu")}
    default = configuration.validate(yaml.safe_load((CONFIGS / "config.yaml").read_text()))
    timings["tune"] = {**default["timing"], **default["tune"]["timing"]}  # as the tune stage merges them
    return timings


TIMINGS = shipped()
