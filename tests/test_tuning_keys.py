"""A tuning record stands as long as the code it timed stands (gemmbench/tuning/codekey.py): comments, docstrings,
layout, another rung's declaration, a helper moved into a header with the same unit leave every committed record
current; a real change to a kernel re-keys its records and no others. All on the CPU, in copies of the tree."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gemmbench.tuning import records
from tests.conftest import ROOT, tree_copy

COMMITTED = len(records.record_paths(ROOT / "resources" / "tuning"))
SPLIT_BARRIERS = len(list((ROOT / "resources" / "tuning").glob("*/cupy/13_split_barriers/*.json")))  # one per GPU model


def check(tree: Path) -> tuple[int, list[str]]:
    """`python -m gemmbench tuning-check` in `tree`: (records that stand, the stale ones)."""
    done = subprocess.run([sys.executable, "-m", "gemmbench", "tuning-check"], cwd=tree, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)}, timeout=None)
    standing = int(re.search(r"(\d+) of (\d+) committed tuning records stand", done.stdout).group(1))
    return standing, [line for line in done.stdout.splitlines() if line.startswith("stale:")]


def migrate(tree: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m gemmbench tuning-migrate` in `tree`."""
    return subprocess.run([sys.executable, "-m", "gemmbench", "tuning-migrate", *args], cwd=tree, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)}, timeout=None)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new, 1))


def test_every_committed_record_stands_for_the_current_code():
    assert check(ROOT) == (COMMITTED, [])


def test_a_results_folder_copied_whole_into_the_committed_ones_is_read_as_its_records_only(tmp_path):
    """README: to share a GPU's results, copy results/tune/<gpu>/ to resources/tuning/<gpu>/. The files the tune
    stage's jobs hand each other lie beside each record there; they are neither records nor stale ones."""
    source = ROOT / "resources/tuning/nvidia-h200/cupy/13_split_barriers/fp32.json"
    folder = tmp_path / "some-gpu" / "cupy" / "13_split_barriers"
    folder.mkdir(parents=True)
    record = folder / "fp32.json"
    record.write_text(source.read_text())
    (folder / "fp32.picked.json").write_text(source.read_text())
    (folder / "fp32.compiled.json").write_text('{"trials": 0}')
    (folder / "fp32.trials.json").write_text('{"key": "k", "trials": []}')
    (folder / "fp32.checks.json").write_text('{"checks": 0}')
    assert records.record_paths(tmp_path) == [record] and records.stale(tmp_path) == []


def test_the_code_key_leaves_out_what_one_python_version_adds_to_a_syntax_tree():
    """Python 3.12 gave functions and classes type_params; the GPU node's Python and CI's must key alike."""
    from gemmbench.tuning import codekey
    from kernels import registry

    text = codekey.canonical(registry.load()["cupy/07_vectorized"])
    assert "FunctionDef(" in text and "type_params" not in text and "ctx=" not in text


def test_comments_and_docstrings_in_shared_files_leave_every_record_current(tmp_path):
    """The files whose one-line comment made most committed records stale, when records were keyed by their bytes."""
    tree = tree_copy(tmp_path / "tree")
    for name, comment in (("kernels/tiles.py", "# a comment\n"), ("kernels/cupy/nvrtc.py", "# a comment\n"),
                          ("kernels/cupy/variants.py", "# a comment\n"),
                          ("kernels/cupy/common.cuh", "// a comment\n/* and\n another */\n"),
                          ("kernels/cupy/tensorcore/variants.py", "# a comment\n"), ("kernels/cupy/10_pipelined.cu",
                                                                                  "// a comment\n")):
        path = tree / name
        path.write_text(comment + path.read_text() + "\n" + comment)
    edit(tree / "kernels/cupy/nvrtc.py", '"""How a CuPy raw-CUDA rung', '"""How, reworded, a CuPy raw-CUDA rung')
    assert check(tree) == (COMMITTED, [])


TOY_RUNG = ('    Rung("15_toy.cu", "sgemm_toy", ("BX", "BY"), {"BX": 32, "BY": 32}, {"BX": (16, 32)},\n'
            '         threads=lambda p: p["BX"] * p["BY"], tile=lambda p: (p["BY"], p["BX"])),\n')


def add_toy_rung(tree: Path) -> None:
    """A new rung is its kernel file and its declaration, nothing else."""
    kernel = (tree / "kernels/cupy/01_naive.cu").read_text().replace("sgemm_naive", "sgemm_toy")
    (tree / "kernels/cupy/15_toy.cu").write_text(kernel)
    text = (tree / "kernels/cupy/variants.py").read_text()
    end = text.rindex(")")
    (tree / "kernels/cupy/variants.py").write_text(text[:end] + TOY_RUNG + text[end:])


def test_a_new_rung_is_its_file_and_declaration_and_leaves_every_other_rungs_record_current(tmp_path):
    tree = tree_copy(tmp_path / "tree")
    add_toy_rung(tree)
    listed = subprocess.run([sys.executable, "-m", "gemmbench", "list"], cwd=tree, capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)}, timeout=None).stdout
    lines = [line.split()[0] for line in listed.splitlines() if line.startswith("cupy/")]
    assert lines.index("cupy/15_toy") == lines.index("cupy/14_warp_specialized") + 1, listed
    assert check(tree) == (COMMITTED, [])


def test_a_helper_moved_into_a_header_with_the_same_unit_leaves_every_record_current(tmp_path):
    """The compiler sees the same translation unit, so it makes the same code: nothing to time again."""
    tree = tree_copy(tmp_path / "tree")
    source = tree / "kernels/cupy/13_split_barriers.cu"
    text = source.read_text()
    start = text.index("__device__ __forceinline__ void barrier_arrive_copies")
    end = text.index("template", start)
    (tree / "kernels/cupy/copy_barriers.cuh").write_text("#pragma once\n// cp.async's arrival\n" + text[start:end])
    source.write_text(text[:start] + '#include "copy_barriers.cuh"\n' + text[end:])
    assert check(tree) == (COMMITTED, [])


def test_a_kernel_edit_that_changes_code_re_keys_that_rungs_records_and_no_other(tmp_path):
    """Also after a check of the unedited tree has stored every variant's digest (codekey's store)."""
    tree = tree_copy(tmp_path / "tree")
    assert check(tree) == (COMMITTED, []) and (tree / "kernels/__pycache__/codekey.json").exists()
    edit(tree / "kernels/cupy/13_split_barriers.cu", "__device__ __forceinline__ void barrier_arrive_copies",
         "__device__ __forceinline__ void barrier_renamed(unsigned long long* barrier);\n"
         "__device__ __forceinline__ void barrier_arrive_copies")
    standing, stale = check(tree)
    assert standing == COMMITTED - SPLIT_BARRIERS and len(stale) == SPLIT_BARRIERS
    assert all("cupy/13_split_barriers/" in line for line in stale)


def test_a_digest_computed_once_is_read_back_until_an_input_changes(tmp_path, monkeypatch):
    """A new process (here: a cleared memory) reads the stored digest instead of parsing the code again; any file of
    kernels/ that reads differently makes it parse again."""
    from gemmbench.tuning import codekey
    from kernels import registry

    variant = registry.load()["cupy/07_vectorized"]
    monkeypatch.setattr(codekey, "STORE", tmp_path / "codekey.json")
    monkeypatch.setattr(codekey, "_digests", {})
    digest = codekey.code_digest(variant)

    def parsed(_):
        raise AssertionError("parsed again")
    monkeypatch.setattr(codekey, "canonical", parsed)
    monkeypatch.setattr(codekey, "_digests", {})
    assert codekey.code_digest(variant) == digest
    shared = registry.KERNELS / "tiles.py"
    real = codekey._file_digest
    monkeypatch.setattr(codekey, "_file_digest", lambda path: b"edited" if path == shared else real(path))
    monkeypatch.setattr(codekey, "_digests", {})
    with pytest.raises(AssertionError, match="parsed again"):
        codekey.code_digest(variant)


def test_a_renamed_helper_that_compiles_the_same_is_migrated_without_a_gpu(tmp_path):
    """The canonical source changes (a name), so the record is stale; the cubin of each class winner does not, so
    `tuning-migrate` re-keys the record and nothing is timed again. A change to what the kernel executes stays stale."""
    tree = tree_copy(tmp_path / "tree")
    source = tree / "kernels/cupy/13_split_barriers.cu"
    source.write_text(source.read_text().replace("barrier_arrive_copies", "copies_arrive"))
    assert check(tree)[0] == COMMITTED - SPLIT_BARRIERS
    migrated = migrate(tree)
    assert "cupy/13_split_barriers/fp32.json: migrated" in migrated.stdout, migrated.stdout + migrated.stderr
    assert check(tree) == (COMMITTED, [])

    edit(source, "cp.async.mbarrier.arrive.noinc.shared", "cp.async.mbarrier.arrive.shared")  # another instruction
    migrated = migrate(tree)
    assert "cupy/13_split_barriers/fp32.json: stale: the code of the winners" in migrated.stdout, migrated.stdout
    assert check(tree)[0] == COMMITTED - SPLIT_BARRIERS


def test_a_record_transfers_to_a_gpu_model_of_the_same_architecture_and_sm_count_and_to_other_compilers(monkeypatch):
    """Labelled with why: another model's search (the H100's for an H800, which has none: sm_90, 132 SMs each; the
    first model in name order of those that have one), or this model's
    searched with other compilers (the GPU node's NVRTC 13.0 for the README's 13.5); not to another architecture."""
    import json

    from gemmbench import configuration
    from gemmbench.tuning import records
    from kernels import registry

    cfg = configuration.validate({})["tune"]
    variant = registry.load()["cupy/10_pipelined"]
    h100 = json.loads((records.COMMITTED / "nvidia-h100-80gb-hbm3" / records.GPU_FACTS).read_text())
    same = {"compute_capability": h100["compute_capability"], "sm_count": h100["sm_count"]}
    path, record, why = records.transferred(cfg, variant, "fp32", "nvidia-h800", same)
    assert path == records.committed_path("nvidia-h100-80gb-hbm3", variant, "fp32") and record["classes"]
    assert "tuned on nvidia-h100-80gb-hbm3, of the same architecture and SM count" in why
    assert records.transferred(cfg, variant, "fp32", "nvidia-h800", {**same, "sm_count": same["sm_count"] - 18}) is None
    assert records.transferred(cfg, variant, "fp32", "nvidia-a100", {**same, "compute_capability": "8.0"}) is None

    ran_with = record["compilers"]
    other = {**ran_with, "nvrtc": "13.5"}
    assert records.committed(cfg, variant, "fp32", "nvidia-h100-80gb-hbm3", other)[1] is None
    monkeypatch.setattr(records, "compilers", lambda v=None: records.relevant(v, other))
    _, _, why = records.transferred(cfg, variant, "fp32", "nvidia-h100-80gb-hbm3", None)
    assert why.startswith("searched with ") and "nvrtc 13.0" in why and "this host has" in why and "nvrtc 13.5" in why


def test_a_host_without_the_gpu_plans_with_the_models_committed_facts(monkeypatch):
    """A submit host (no GPU) plans a named model's jobs with that model's committed architecture and SM count, so it
    expects the transfers the GPU's own jobs will make; a host with a GPU goes by its own."""
    import json

    from gemmbench.tuning import records

    h100 = "nvidia-h100-80gb-hbm3"
    committed = json.loads((records.COMMITTED / h100 / records.GPU_FACTS).read_text())
    monkeypatch.setattr(records, "host_gpu", lambda: None)
    assert records.facts_for(h100) == {name: committed[name] for name in ("compute_capability", "sm_count")}
    assert records.facts_for("a-gpu-nobody-tuned-for") is None
    monkeypatch.setattr(records, "host_gpu", lambda: {"compute_capability": "8.0", "sm_count": 108})
    assert records.facts_for(h100) == {"compute_capability": "8.0", "sm_count": 108}


def test_a_record_is_parsed_once_until_its_file_changes(tmp_path):
    """Planning asks for each record per job: the parse is shared while the file is the same, and a rewritten
    record is read again."""
    import os

    from gemmbench.tuning import records

    path = tmp_path / "fp32.json"
    path.write_text('{"key": "a"}')
    first = records.read(path)
    assert records.read(path) is first and records.reusable(path, "a") is first
    path.write_text('{"key": "bb"}')
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1))
    assert records.read(path) == {"key": "bb"} and records.reusable(path, "a") is None


def test_a_record_whose_digests_another_host_took_is_migrated_since_a_revision_it_stood_for(tmp_path):
    """Rung 13's records as if a GPU host's compiler had taken their digests (another label): tuning-migrate cannot
    compare them, and says how; with --since the committed revision, a rename that compiles the same here is
    re-keyed, and a change to the instructions stays stale."""
    import json

    tree = tree_copy(tmp_path / "tree")
    for record in (tree / "resources/tuning").glob("*/cupy/13_split_barriers/*.json"):
        content = json.loads(record.read_text())
        for made in content["generated"].values():
            made["compiler"] = "nvrtc 0.0"
        record.write_text(json.dumps(content, indent=1))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tree)]
    for command in (["init", "--quiet"], ["add", "--all"], ["commit", "--quiet", "-m", "tree"]):
        subprocess.run(git + command, check=True, capture_output=True)
    source = tree / "kernels/cupy/13_split_barriers.cu"
    source.write_text(source.read_text().replace("barrier_arrive_copies", "copies_arrive"))

    def said(*args):
        done = migrate(tree, *args)
        return done.stdout + done.stderr

    said_now = said()
    assert "13_split_barriers/fp32.json: stale; its code digests were taken by nvrtc 0.0" in said_now, said_now
    assert "--since" in said_now and check(tree)[0] == COMMITTED - SPLIT_BARRIERS
    said_now = said("--since", "HEAD")
    assert "13_split_barriers/fp32.json: migrated: every class winner compiles here to the same code at HEAD" in \
        said_now
    assert check(tree) == (COMMITTED, [])

    subprocess.run(git + ["checkout", "--quiet", "--", "resources"], check=True)
    edit(source, "cp.async.mbarrier.arrive.noinc.shared", "cp.async.mbarrier.arrive.shared")  # another instruction
    said_now = said("--since", "HEAD")
    assert "13_split_barriers/fp32.json: stale: it did not stand at HEAD, or its winners' code changed" in said_now
    assert check(tree)[0] == COMMITTED - SPLIT_BARRIERS


def test_a_search_that_stopped_no_trial_behind_stands_for_one_that_does_and_not_the_other_way():
    """Stopping a trial clearly behind (tune.stop_behind) leaves every pick as it was: a committed search that
    stopped none, or only further behind, stands for one that stops sooner; its trials are kept by a deeper one."""
    full = {"trials": 32, "seed": 0, "sizes": [1024, 4096], "timing": {"min_samples": 5}, "narrow_to": 6}
    stopping = {**full, "stop_behind": 1.25}
    assert records.covers(full, stopping) and records.covers({**full, "stop_behind": 2.0}, stopping)
    assert not records.covers(stopping, full) and not records.covers(stopping, {**full, "stop_behind": 2.0})
    assert records.alike(full, stopping) and records.stopped_no_sooner(full, {**stopping, "trials": 64})
    assert not records.stopped_no_sooner(stopping, full)
