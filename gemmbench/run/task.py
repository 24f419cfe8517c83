"""The stage ↔ worker contract: what a stage asks a worker process to do, as plain typed data (JSON on disk)."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gemmbench import plan


@dataclass
class Point:
    """One shape to run: its sizes along the workload's axes and the seed of its inputs. A tune trial also names
    the candidate parameters and the size class it is timed for, and whether it is one of a search's trials or the
    candidate the search picked; a measure task's point says whether it validates or times, and a timed point which
    earlier point validated its shape (it runs only if that one passed)."""

    sizes: dict[str, int]
    seed: int
    params: dict = field(default_factory=dict)
    size_class: int | None = None
    stage: str = ""  # measure: validate | bench; tune: "" (a trial) | pick
    checked_by: int | None = None


@dataclass
class Task:
    """A worker's job: build one variant in one mode, then run `points` (measure or tune) in order.
    `classes` holds the tuned parameters per size class ({1024: {...}}); None runs `params` at every size."""

    kind: str  # build | measure (validate, then time) | tune | compile (tune candidates, ahead) | profile (ncu)
    variant: str
    variant_modules: list[str]
    device: str
    mode: str
    params: dict
    cache_dir: str  # compiled artifacts and device facts, shared by every job and process (cache_dir)
    points: list[Point]
    timing: dict
    cache: str  # hot | cold
    classes: dict[int, dict] | None = None
    prepare: list[dict[str, int]] = field(default_factory=list)  # build: the shapes to compile ahead (Variant.prepare)
    refused: dict[str, str] = field(default_factory=dict)  # build: shapes the variant refused when compiled ahead
    wrap: list[str] = field(default_factory=list)  # a command the worker runs under (profile: Nsight Compute's)

    @classmethod
    def of(cls, kind: str, config: dict, variant, mode: str, points: list[Point], classes: dict | None = None,
           prepare: list[dict] = (), refused: dict | None = None) -> "Task":
        """The task of `kind` for one variant and mode, from the validated config (`classes`: a build record's
        tuned parameters per size class)."""
        return cls(kind=kind, variant=variant.key, variant_modules=list(config["variant_modules"]),
                   device=variant.device, mode=mode, params=plan.params(config, variant),
                   classes=size_classes(classes), cache_dir=str(cache_dir(config)), points=points,
                   timing=tune_timing(config) if kind == "tune" else config["timing"],
                   cache=config["cache"], prepare=list(prepare), refused=dict(refused or {}))

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> "Task":
        data = json.loads(Path(path).read_text())
        return cls(**{**data, "points": [Point(**p) for p in data["points"]], "classes": size_classes(data["classes"])})


def tune_timing(config: dict) -> dict:
    """A trial's timing: the tune section's short one over the main settings, without the power cap's longer window
    (capped_span_s): candidates are compared in one state, and each record is keyed by the tune section's timing."""
    main = {key: value for key, value in config["timing"].items() if key != "capped_span_s"}
    return {**main, **config["tune"]["timing"]}


def size_classes(classes: dict | None) -> dict[int, dict] | None:
    """Tuned parameters by size class, the sizes as numbers (JSON, and the records, write them as strings)."""
    return None if classes is None else {int(size): dict(params) for size, params in classes.items()}


def cache_dir(config: dict) -> Path:
    """Compiled kernels and device facts, shared by every job and process (results/cache unless configured)."""
    return Path(config["cache_dir"]).resolve()


def not_timed(check: dict) -> dict:
    """The row of a sweep point whose shape did not pass validation (`check`: that validation's row)."""
    return {"status": "skipped", "message": f"not benchmarked: validation {check['status']}: {check['message']}"}


def pick(classes: dict, m: int, n: int, k: int):
    """The class whose size is nearest (in log scale) to the cube root of the point's m·n·k. A point halfway between
    two classes (2048 between 1024 and 4096) runs the larger one's winner: its tiles still fill the GPU, and every
    CuPy rung ran faster so on an H200 (reports/examples/h200-serving-2048). Distances are compared to 9 decimals, so
    that float rounding of the cube root does not decide such a tie (it gave 2048 to 1024)."""
    size = (math.log(m) + math.log(n) + math.log(k)) / 3
    return min(classes, key=lambda c: (round(abs(math.log(int(c)) - size), 9), -int(c)))
