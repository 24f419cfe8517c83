"""Committed tuning records: where they live, what keys them, and whether one stands for the code here.

A record maps size classes (representative square sizes) to the fastest validated parameter set found on one GPU
model, with the trials that found it (tuning/search.py). It stands while the code it timed stands (codekey.py: the
code as its compilers read it), with the same search space, settings, measuring method and compilers; a record of
another model of the same architecture and SM count, or of other compilers, is taken where none stands, labelled as
transferred. Records are results: they live under resources/tuning/<gpu>/<family>/<variant>/<mode>.json.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

from gemmbench import ROOT
from gemmbench.files import digest, write_json
from gemmbench.measure import provenance
from gemmbench.tuning import codekey
from kernels import registry

COMMITTED = ROOT / "resources" / "tuning"  # results for GPUs we have run on, like TVM's TopHub

# The toolchain entries that turn a kernel's source into machine code (provenance.toolchain's names): a tuning
# result holds for the compilers it was searched with (NVRTC 13.0 and 13.1 make different SASS of one source).
# A variant that declares none (Variant.compilers) is keyed on all the families' compilers.
COMPILERS = tuple(dict.fromkeys((*registry.NVRTC, *registry.NUMBA, *registry.TVM)))


def settings(tune: dict, variant: registry.Variant) -> dict:
    """The tune settings a variant's result depends on: the generic search's, or those of the autotuner (a
    variant's own search, such as MetaSchedule's, with its own trial budget and size classes), and the timing of
    each trial (which decides what `fastest` means); for the generic search, `narrow_to` where it narrows a class's
    candidates to the fastest of the class below (`narrowed`) and `stop_behind` where it stops a trial clearly behind
    (a full search's settings, as before there was either, have neither). The record names its size classes
    `sizes`."""
    own = tune["autotuner"] if variant.tuner else tune
    found = {"trials": own["trials"], "seed": tune["seed"], "sizes": own["size_classes"], "timing": tune["timing"]}
    if variant.tuner:
        return found
    return {**found, **{name: tune[name] for name in ("narrow_to", "stop_behind") if tune[name]}}


def determining_files(variant: registry.Variant) -> list[str]:
    """The files whose edits must re-run a variant's jobs: its declared sources, the module that defines its build
    (its launch code) and the one that registered it (its declaration, such as the tensor-core rungs' tiles and
    checks beside the CuPy ladder's launch code), and the kernels/ modules these use (shared helpers such as
    kernels/tiles.py), but for those that only read what was compiled (DETERMINES_KERNELS = False, such as
    kernels/sass.py)."""
    used = set()
    if variant.build:
        modules = {sys.modules[variant.build.__module__], sys.modules[registry.origin(variant.key)]}
        owners = (value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
                  for module in modules for value in vars(module).values())
        used = {*(module.__name__ for module in modules),
                *(owner for owner in owners if isinstance(owner, str) and owner.startswith("kernels.")
                  and owner != registry.__name__ and getattr(sys.modules.get(owner), "DETERMINES_KERNELS", True))}
    return sorted({*variant.source_files, *(str(Path(sys.modules[name].__file__).resolve()) for name in used)})


# What the worker that compiles and times this job's trials reported (`adopt`): its toolchain and GPU stand for this
# host's, so that a job holding the GPU learns them without importing CuPy or making a CUDA context of its own.
_reported: dict = {}


def adopt(device: dict) -> None:
    """Take the toolchain (`versions`) and GPU of a worker's device facts (supervise.device_facts) as this host's."""
    _reported.update(versions=device["versions"],
                     gpu={name: device[name] for name in KIND} if all(name in device for name in KIND) else None)


def toolchain() -> dict:
    """This host's toolchain: as its worker reported it (`adopt`), else as this process finds it."""
    return _reported["versions"] if "versions" in _reported else provenance.toolchain()


def compilers(variant: registry.Variant | None = None) -> dict:
    """This host's versions of the variant's compilers (of all COMPILERS without one)."""
    return relevant(variant, toolchain())


def relevant(variant: registry.Variant | None, versions: dict) -> dict:
    """The entries of `versions` that compile the variant's kernels: a Numba kernel's tuning does not depend on
    whether TVM is installed beside it."""
    names = (variant.compilers if variant and variant.compilers else COMPILERS)
    return {name: version for name, version in versions.items() if name in names}


# How a trial is measured, as far as its median goes (the timed region and the statistics): a change to it re-times
# every record. The checks around the timed region (ledger.py) are not part of it.
METHOD = 1


def key(variant: registry.Variant, mode: str, settings: dict, with_compilers: dict | None = None) -> str:
    """What a tuning result depends on: the variant's code as its compilers see it (codekey: comments, docstrings,
    layout and other rungs' declarations left out), the search space, the tune settings with the trial timing
    (`settings`), the measuring method and the variant's compilers (from `with_compilers`; default: this host's)."""
    return digest({"code": codekey.code_digest(variant), "variant": variant.key, "mode": mode, "space": variant.space,
                   "settings": settings, "method": METHOD,
                   "compilers": relevant(variant, toolchain() if with_compilers is None else with_compilers)})


def shown(path: Path) -> str:
    """A record's path as rows and logs name it: from the project's root (resources/tuning/...)."""
    return str(path.relative_to(COMMITTED.parent.parent))


def committed_path(gpu: str, variant: registry.Variant, mode: str) -> Path:
    return COMMITTED / gpu / variant.family / variant.name / f"{mode}.json"


def read(path: Path) -> dict:
    """A committed record, parsed once per process and content (planning asks for each several times per job, and
    the largest hold thousands of trials): shared, so callers copy before they change it."""
    stat = path.stat()
    return _parsed(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=None)
def _parsed(path: Path, mtime_ns: int, size: int) -> dict:
    return json.loads(path.read_text())


def reusable(path: Path, expected_key: str) -> dict | None:
    if not path.exists():
        return None
    record = read(path)
    return record if record.get("key") == expected_key else None


def committed(tune: dict, variant: registry.Variant, mode: str, gpu: str,
              with_compilers: dict | None = None) -> tuple[Path, dict | None]:
    """Where the committed result for `variant` on GPU model `gpu` lives, and that result if it still stands for
    the current sources, search space, tune settings (`tune`: the config's tune section) and compilers
    (`with_compilers`, default this host's). A generic search of more trials with the same seed and sizes stands
    too: its seeded candidates begin with the configured ones (`candidates`), so it covers that search. A variant
    with a search of its own (which proposes as it goes) and no trial budget in `tune` takes the committed search as
    it was run (its settings and compilers), if it was run on the current sources."""
    path = committed_path(gpu, variant, mode)
    wanted = settings(tune, variant)
    record = reusable(path, key(variant, mode, wanted, with_compilers))
    if record is None and path.exists():
        ran = read(path)
        if variant.tuner and not tune["autotuner"]["trials"]:
            record = reusable(path, key(variant, mode, ran["settings"], ran.get("compilers", {})))
        elif not variant.tuner and covers(ran["settings"], wanted):
            record = reusable(path, key(variant, mode, ran["settings"], with_compilers))
    return path, record


def record_paths(root: Path) -> list[Path]:
    """The tuning records under `root` (<gpu>/<family>/<variant>/<mode>.json), less the files the tune stage's jobs
    hand each other beside them (<mode>.compiled.json, .trials.json, .checks.json, .picked.json): a results/tune/<gpu>/
    folder copied whole to commit its records holds those too."""
    return sorted(path for path in Path(root).glob("*/*/*/*.json") if path.name.count(".") == 1)


def _records(root: Path):
    """Each committed record under `root` (<gpu>/<family>/<variant>/<mode>.json): its name, path, contents, variant
    (None if none is registered) and the key it would have now, with its own settings and compilers."""
    known = registry.load()
    for path in record_paths(root):
        record = json.loads(path.read_text())
        variant = known.get(record.get("variant"))
        now = variant and key(variant, record["mode"], record["settings"], record.get("compilers", {}))
        yield path.relative_to(root), path, record, variant, now


def stale(root: Path = COMMITTED) -> list[str]:
    """The committed records under `root` that no longer stand for their variant's code, each with why: a record's
    search settings and compilers are its own, so this asks only whether the code it timed, its space and the
    measuring method are unchanged. Needs no GPU and no compiler."""
    found = []
    for name, _, record, variant, now in _records(root):
        if variant is None:
            found.append(f"{name}: no variant {record.get('variant')!r} is registered")
        elif now != record.get("key"):
            found.append(f"{name}: its variant's code, space or measuring method changed")
    return found


def generated(variant: registry.Variant, mode: str, classes: dict) -> dict | None:
    """What the compiler makes of each class's winner (Variant.generated), by class size; None for a variant
    without the hook."""
    if variant.generated is None:
        return None
    return {size: variant.generated(mode, found["params"]) for size, found in classes.items()}


def migrate(root: Path = COMMITTED, since: str | None = None) -> list[str]:
    """Re-key the committed records that are stale only by their key: those whose space is the variant's and whose
    every class winner comes out of the compiler as it did when it was timed (the same digests, compiler and launch
    settings). A record whose digests another host took (another compiler, or the same one under another Python)
    cannot be compared so; with `since` (a git revision the record stood for), it is re-keyed where its winners
    compile here to the same code at that revision and now. Says what it did with each stale record; the others need
    a GPU (the tune stage searches again)."""
    said, tree = [], None
    with contextlib.ExitStack() as stack:
        for name, path, record, variant, now in _records(root):
            if variant is None:
                said.append(f"{name}: no variant {record.get('variant')!r} is registered; left as it is")
                continue
            if now == record.get("key"):
                continue
            stored = record.get("generated")
            if not stored or variant.generated is None:
                said.append(f"{name}: stale, and no generated code to compare (the tune stage will search again)")
                continue
            if json.loads(json.dumps(variant.space)) != record.get("space"):
                said.append(f"{name}: stale: its search space changed (the tune stage will search again)")
                continue
            current = json.loads(json.dumps(generated(variant, record["mode"], record["classes"])))  # as stored
            changed = [size for size in stored if stored[size] != current.get(size)]
            if not changed:
                write_json(path, {**record, "key": now})
                said.append(f"{name}: migrated: every class winner compiles to the same code")
                continue
            if since:
                tree = tree or stack.enter_context(_revision_tree(since))
                if _generated_at(tree, path) == current:
                    write_json(path, {**record, "key": now})
                    said.append(f"{name}: migrated: every class winner compiles here to the same code at {since} "
                                f"and now")
                    continue
                said.append(f"{name}: stale: it did not stand at {since}, or its winners' code changed since")
                continue
            taken = sorted({c["compiler"] for c in stored.values()})
            if {c["compiler"] for c in current.values()} != set(taken):
                said.append(f"{name}: stale; its code digests were taken by {', '.join(taken)}, not this host's "
                            f"compiler: run tuning-migrate where that compiler is, or with --since a revision the "
                            f"record stood for")
            else:
                said.append(f"{name}: stale: the code of the winners at n={', '.join(changed)} changed (a GPU "
                            f"re-times it; if another host took its digests, --since a revision it stood for)")
    return said


@contextlib.contextmanager
def _revision_tree(revision: str):
    """The project's sources at a git revision, checked out beside it for the length of the block."""
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "tree"
        done = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--quiet", "--detach", str(tree), revision],
                              capture_output=True, text=True)
        if done.returncode:
            raise ValueError(f"--since {revision}: no such revision of {ROOT} to check out "
                             f"({(done.stderr.strip().splitlines() or ['git failed'])[-1]})")
        try:
            yield tree
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)


_AT_REVISION = """
import json, sys
from pathlib import Path
from gemmbench.tuning import records
from kernels import registry
record = json.loads(Path(sys.argv[1]).read_text())
variant = registry.load().get(record["variant"])
stood = variant is not None and records.key(variant, record["mode"], record["settings"],
                                            record.get("compilers", {})) == record.get("key")
print(json.dumps(records.generated(variant, record["mode"], record["classes"]) if stood else None))
"""


def _generated_at(tree: Path, path: Path) -> dict | None:
    """What the record at `path` has its class winners compile to here in the sources of `tree` (another revision),
    if it stood for that revision's code; else None."""
    done = subprocess.run([sys.executable, "-c", _AT_REVISION, str(path.resolve())], cwd=tree, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(tree)})
    return json.loads(done.stdout.splitlines()[-1]) if done.returncode == 0 and done.stdout.strip() else None


GPU_FACTS = "gpu.json"  # resources/tuning/<gpu>/gpu.json: the model's compute capability and SM count


def origin(tune: dict, variant: registry.Variant, mode: str, gpu: str, facts: dict | None) -> str:
    """Where the tune stage takes this variant's parameters from on GPU model `gpu` (`facts`: this host's GPU):
    "committed" (a record that stands here), "transferred" (transferred, where `tune` allows it) or "searched"."""
    if committed(tune, variant, mode, gpu)[1]:
        return "committed"
    if tune["transfer"] and transferred(tune, variant, mode, gpu, facts):
        return "transferred"
    return "searched"


def host_gpu() -> dict | None:
    """GPU 0's architecture and SM count (what decides whether another model's tuning transfers); None without one.
    As the worker reported them (`adopt`), else as this process finds them."""
    return _reported["gpu"] if "gpu" in _reported else _own_gpu()


@functools.cache
def _own_gpu() -> dict | None:
    try:
        import cupy

        device = cupy.cuda.Device(0)
        capability = device.compute_capability  # "90": as the device facts write it, "9.0"
        return {"compute_capability": f"{capability[:-1]}.{capability[-1]}",
                "sm_count": device.attributes["MultiProcessorCount"]}
    except Exception:  # no CuPy or no GPU (a submit host): only this model's own records can transfer
        return None


def transferred(tune: dict, variant: registry.Variant, mode: str, gpu: str,
                facts: dict | None) -> tuple[Path, dict, str] | None:
    """A committed record to use, labelled as transferred, where none stands for this host (`committed`): this GPU
    model's, searched with other compilers, else one of another model with the same architecture and SM count
    (`facts`: this GPU's; resources/tuning/<model>/gpu.json, theirs). Either way its code is the variant's (the key,
    with the record's own settings and compilers, stands) and its search covers the configured one. Returns the
    record's path, the record and why it is transferred."""
    wanted = settings(tune, variant)
    others = sorted(COMMITTED.iterdir()) if COMMITTED.exists() else []
    models = [gpu, *(d.name for d in others if d.name != gpu and _same_kind(d, facts))]
    for model in models:
        path = committed_path(model, variant, mode)
        if not path.exists():
            continue
        ran = read(path)
        if key(variant, mode, ran["settings"], ran.get("compilers", {})) != ran.get("key"):
            continue
        if not variant.tuner and not covers(ran["settings"], wanted):
            continue
        ran_with, here = relevant(variant, ran.get("compilers", {})), compilers(variant)
        why = [f"tuned on {model}, of the same architecture and SM count"] if model != gpu else []
        if ran_with != here:
            why.append("searched with " + ", ".join(f"{k} {v}" for k, v in sorted(ran_with.items()))
                       + "; this host has " + ", ".join(f"{k} {v}" for k, v in sorted(here.items())))
        return path, ran, "; ".join(why) or "searched with other settings"
    return None


def facts_for(gpu: str) -> dict | None:
    """GPU model `gpu`'s architecture and SM count: this host's GPU 0's, or, on a host without one (a submit host
    planning for the model), those committed for the model (resources/tuning/<gpu>/gpu.json), so that planning
    expects what the GPU's own jobs will find."""
    facts = host_gpu()
    if facts is None:
        theirs = _committed_facts(COMMITTED / gpu)
        return {name: theirs[name] for name in KIND} if theirs and "sm_count" in theirs else None
    return facts


KIND = ("compute_capability", "sm_count")  # what a model's tuning shares with another's (see transferred)


def _committed_facts(folder: Path) -> dict | None:
    known = folder / GPU_FACTS
    return json.loads(known.read_text()) if known.exists() else None


def _same_kind(folder: Path, facts: dict | None) -> bool:
    theirs = _committed_facts(folder)
    return bool(facts and theirs) and all(theirs.get(name) == facts[name] for name in KIND)


def covers(ran: dict, wanted: dict) -> bool:
    """Whether a search run with settings `ran` stands for one `wanted`: as many candidates or more, alike, each
    class's candidates narrowed no more (a full search, without `narrow_to`, is the widest), and its trials stopped
    no sooner (`stopped_no_sooner`)."""
    ran_to, wanted_to = ran.get("narrow_to", 0), wanted.get("narrow_to", 0)
    return ran["trials"] >= wanted["trials"] and alike(ran, wanted) and stopped_no_sooner(ran, wanted) and (
        not ran_to or bool(wanted_to and ran_to >= wanted_to))


def stopped_no_sooner(ran: dict, wanted: dict) -> bool:
    """Whether a search run with settings `ran` stopped trials behind the fastest (`stop_behind`) no sooner than one
    `wanted` would: it never did, or only further behind. Its trials then stand for that search's."""
    ran_at, wanted_at = ran.get("stop_behind", 0), wanted.get("stop_behind", 0)
    return not ran_at or bool(wanted_at and ran_at >= wanted_at)


def alike(ran: dict, wanted: dict) -> bool:
    """Whether two searches' trials are timed alike: the same seed (so the same candidates, in order), classes and
    trial timing, whatever their number of candidates, narrowing and stopping behind."""
    apart = lambda settings: {k: v for k, v in settings.items()  # noqa: E731
                              if k not in ("trials", "narrow_to", "stop_behind")}
    return apart(ran) == apart(wanted)


# A size class at most this many times the class below it times only that class's fastest candidates (tune.narrow_to):
# neighbouring sizes whose tiles fill the GPU alike rank candidates alike. In the 69 committed searches of two GPU
# models, the fastest at 8192 was among the 6 fastest at 4096 every time; the fastest at 4096 was often not among
# the fastest at 1024, where few tiles fill the GPU (reports/examples/h200-first-run-narrowed).
NEIGHBOURS = 2


def narrowed(settings: dict) -> dict[int, int]:
    """The size classes whose candidates are narrowed, each with the class below it, in ascending order."""
    if not settings.get("narrow_to"):
        return {}
    sizes = sorted(settings["sizes"])
    return {size: below for below, size in zip(sizes, sizes[1:]) if size <= NEIGHBOURS * below}
