"""The tune stage: per variant, mode and GPU model, the fastest validated parameters per size class: a committed
record that stands for this code is reused, one that stands but was searched elsewhere is transferred (labelled),
and otherwise the space is searched here (tuning/search.py)."""
from __future__ import annotations

import logging
import time
from pathlib import Path

from gemmbench import logs
from gemmbench.files import read_json, write_json
from gemmbench.run import supervise
from gemmbench.run.task import Task
from gemmbench.stages.common import variant_of
from gemmbench.tuning import records, search

log = logging.getLogger("gemmbench")


def run(config: dict, key: str, mode: str, gpu: str, out, timed=None, holds_gpu: bool = False) -> dict:
    """The fastest validated parameters per size class on this GPU: a committed result for this GPU is reused
    when the kernel sources, search space and settings are unchanged; otherwise the space is searched. A searched
    record is written without its `generated` code, which the tune_code job adds (`code`). `timed`: the file of a
    variant specialised per shape whose trials the tune_trials job timed (`trials`); this job then checks and audits
    the picks. `holds_gpu`: the job was planned to search, so it holds the GPU (`as_its_worker_sees`)."""
    logs.job_started(key, mode)
    start = time.perf_counter()
    variant = variant_of(config, key)
    if holds_gpu:
        as_its_worker_sees(config, variant, mode)
    settings = records.settings(config["tune"], variant)
    expected = records.key(variant, mode, settings)
    committed, record = records.committed(config["tune"], variant, mode, gpu)
    keyed_s = time.perf_counter() - start
    if record:
        reused_from = records.shown(committed)
        log.info("%s %s: reusing the committed tuning result %s", key, mode, reused_from)
        # a search of its own, without a budget to search again
        if records.relevant(variant, record.get("compilers", {})) != records.compilers(variant):
            log.warning("%s %s: %s was tuned with %s; this host compiles with %s", key, mode, reused_from,
                        record.get("compilers"), records.compilers(variant))
        write_json(out, {**record, "reused_from": reused_from})
        return record
    facts = records.host_gpu()
    found = records.transferred(config["tune"], variant, mode, gpu, facts) if config["tune"]["transfer"] else None
    if found:
        path, record, why = found
        source = records.shown(path)
        log.warning("%s %s: no committed tuning result for this GPU and toolchain; using %s, transferred: %s "
                    "(tune.transfer=false searches instead)", key, mode, source, why)
        write_json(out, {**record, "reused_from": source, "transferred": why})
        return record
    if facts:  # what another GPU model's run needs to know to take these records (tune.transferred)
        write_json(Path(out).parents[2] / records.GPU_FACTS, facts)
    # a search holds the GPU from its job's start: what it spends before searching, stamped
    log.info("%s %s: the toolchain%s, the record's key and the committed records' lookup took %.2f s, the GPU's "
             "facts and the transfer's lookup %.2f s", key, mode, " (its worker's)" if holds_gpu else "", keyed_s,
             time.perf_counter() - start - keyed_s)
    if variant.tuner:
        record = search.own_search(config, variant, mode, gpu, settings, expected, committed, stem(out))
    else:
        record = search.search(config, variant, mode, gpu, settings, expected, committed,
                               compiled=compiled_ahead(out), timed=timed_trials(timed, expected))
    write_json(out, record)
    return record


def code(config: dict, key: str, mode: str, picked, out) -> dict:
    """The tuning record: the tune job's (`picked`) with what the compiler makes of each class's pick (`generated`),
    where it does not hold it already (a committed or transferred record does). The tune_code job, on the CPU: the
    tune job holds the GPU, and compiling a TVM or Numba kernel takes seconds."""
    record = read_json(picked)
    if "generated" not in record:
        record["generated"] = records.generated(variant_of(config, key), mode, record["classes"])
    write_json(out, record)
    return record


def trials(config: dict, key: str, mode: str, gpu: str, out) -> dict:
    """The tune_trials job of a variant specialised per shape, searched here: its trials timed on the GPU, so that
    the tune_check_compile job can compile its serving checks' kernels beside the GPU's jobs before the tune job
    checks and audits the picks."""
    logs.job_started(key, mode)
    variant = variant_of(config, key)
    as_its_worker_sees(config, variant, mode)
    settings = records.settings(config["tune"], variant)
    timed = search.time_trials(config, variant, mode, gpu, settings, records.committed_path(gpu, variant, mode),
                               compiled=compiled_ahead(out))
    done = {"key": records.key(variant, mode, settings), "trials": timed}
    write_json(out, done)
    return done


def as_its_worker_sees(config: dict, variant, mode: str) -> None:
    """A job that holds the GPU takes the toolchain and GPU of the resident worker that compiles and times its trials
    as this host's (records.adopt), rather than spend the GPU's time on CuPy's import and a CUDA context of its own to
    learn them (reports/examples/search-preamble). Where no worker reports them, the job finds them itself."""
    task = Task.of("tune", config, variant, mode, [])
    device = supervise.device_facts(task, task.timing["point_timeout_s"])
    if device:
        records.adopt(device)


def timed_trials(path, expected: str) -> list[dict] | None:
    """The trials the tune_trials job timed (its file at `path`, where there is one), if they were timed for this
    record's key: the sources, space and settings of this search."""
    done = read_json(path) if path else None
    return done["trials"] if done and done.get("key") == expected else None


def compile_checks(config: dict, key: str, mode: str, timed, out) -> dict:
    """The tune_check_compile job: the serving checks' kernels of the trials in `timed` (the tune_trials job's file),
    compiled beside the GPU's jobs."""
    variant = variant_of(config, key)
    done = search.compile_checks(config, variant, mode, read_json(timed)["trials"],
                                 records.settings(config["tune"], variant)["sizes"])
    write_json(out, done)
    return done


def stem(out) -> Path:
    """results/tune/<gpu>/<family>/<variant>/<mode>, of any of the files the tune stage's jobs write there."""
    return Path(out).parent / Path(out).name.split(".")[0]


def compiled_path(out) -> Path:
    """Where the tune_compile job says what it compiled for the tune job whose result is `out`."""
    return stem(out).with_suffix(".compiled.json")


def compiled_ahead(out) -> bool:
    """Whether the tune_compile job compiled the trials of the search whose job writes `out`."""
    ahead = compiled_path(out)
    return ahead.exists() and "trials" in read_json(ahead)


def compile_ahead(config: dict, key: str, mode: str, gpu: str, out) -> dict:
    """The tune_compile job: where the tune job will search here (no committed or transferred result), its trials
    compiled into the shared caches, beside the GPU's jobs; otherwise nothing, and why."""
    variant = variant_of(config, key)
    where = records.origin(config["tune"], variant, mode, gpu, records.facts_for(gpu))
    if where != "searched":
        done = {"nothing": f"the tune job's result is {where}"}
    elif variant.tuner:
        done = {"nothing": "its own search compiles each round it proposes"}
    else:
        done = search.compile_trials(config, variant, mode, gpu, records.settings(config["tune"], variant))
    write_json(out, done)
    return done
