"""What the stages share: the config sections each reads (READS, config_for), a point's identity columns
(base_row), the shapes a variant is validated at, and the tables the presenting stages read."""
from __future__ import annotations

from pathlib import Path

from gemmbench import ROOT, plan, workloads
from gemmbench.files import read_json
from gemmbench.measure import devices, provenance
from gemmbench.tuning import records
from kernels import registry

# The config sections each stage reads; "sweep" and "listed" stand for those its workload's sweep and awkward
# shapes read (Workload.config_keys). A stage's rule passes exactly these, narrowed to its job's variant and mode
# (config_for), as the params the stage runs on: a change to one of them re-runs the stage's jobs, a change to any
# other section does not.
_RUNS = ("variant_modules", "params", "timing", "cache", "cache_dir")

READS = {
    "tune": (*_RUNS, "tune", "seed", "max_size", "sweep"),  # the sweep: where each class's winner is checked
    "build": (*_RUNS, "max_size", "sweep", "listed"),
    "measure": (*_RUNS, "max_size", "seed", "sweep", "listed"),
    "profile": (*_RUNS, "max_size", "seed", "sweep", "profile"),
}


def config_for(config: dict, stage: str, key: str, mode: str) -> dict:
    """What `stage` reads of the validated `config` for variant `key` in `mode` (READS): the params and max_size
    entries of that variant (or its family)."""
    shapes = workloads.get(variant_of(config, key).workload).config_keys
    sections = dict.fromkeys(s for name in READS[stage] for s in shapes.get(name, (name,)))
    family = key.split("/")[0]
    narrowed = {"params": {k: v for k, v in config["params"].items() if k == key},
                "max_size": {k: v for k, v in config["max_size"].items() if k in (key, family)}}
    return {section: narrowed.get(section, config[section]) for section in sections}


def variant_of(config: dict, key: str) -> registry.Variant:
    return registry.load(config["variant_modules"])[key]


def base_row(config, variant, mode, shape: plan.Shape) -> dict:
    # gpu, gpu_uuid and host name the device the point ran on (set once a worker reports it; none if it never ran);
    # git_commit and git_dirty the tree that ran it
    return {"gpu": None, "gpu_uuid": None, "host": None, "device": variant.device, "workload": variant.workload,
            "family": variant.family, "variant": variant.name, "role": variant.role, "mode": mode,
            **shape.sizes, "shape_kind": shape.kind, "cache": config["cache"],
            "seed": devices.seed_for(config["seed"], *shape.sizes.values()), **provenance.source(str(ROOT)),
            "source_digest": provenance.sources_digest(str(ROOT), tuple(records.determining_files(variant)))}


CLASS_OFFSETS = (-1, 1, -3, 3)  # an off-tile shape near a size class: its sizes plus these, axis by axis


def validation_shapes(config: dict, variant: registry.Variant, classes: dict | None) -> list[plan.Shape]:
    """The plan's validation shapes and, for a variant tuned per size class, one off-tile shape per class: the
    square sweep sizes are whole tiles of every class's kernel, and each class's kernel is the one timed there."""
    shapes = plan.validation_shapes(config, variant.workload)
    known = {shape.dims for shape in shapes}
    axes = workloads.get(variant.workload).axes
    for size in sorted(int(size) for size in classes or {} if size):
        shape = plan.Shape.of(variant.workload, [size + d for d in CLASS_OFFSETS[:len(axes)]], "awkward")
        if shape.dims not in known:
            shapes.append(shape)
    return shapes


def tables_of(tables_dir) -> dict:
    import pandas as pd

    tables_dir = Path(tables_dir)
    frames = {name: pd.read_parquet(tables_dir / f"{name}.parquet") for name in ("summary", "validation", "builds")}
    profiled = tables_dir / "profile.parquet"  # written by the profile stage, where it ran
    return {**frames, "devices": read_json(tables_dir / "devices.json"),
            "profile": pd.read_parquet(profiled) if profiled.exists() else None}
