"""Fault injection through the real stages: wrong, hanging and crashing kernels end as status rows."""
import json
import logging
import os
import sys
from pathlib import Path

import pytest

from gemmbench import configuration
from gemmbench.measure import checking
from gemmbench.stages import build, common, measure, profile, tune
from gemmbench.tuning import search


@pytest.fixture
def cfg(cpu_config, tmp_path):
    cpu_config.update(variant_modules=["tests.planted"], square_sizes=[32, 128], validation_shapes=[[7, 13, 5]],
                      cache_dir=str(tmp_path / "cache"))
    cpu_config["timing"].update(point_timeout_s=5)
    return configuration.validate(cpu_config)


def run_stages(cfg, tmp_path, key, size=32, mode="fp32"):
    built = build.run(cfg, key, mode, tmp_path / "build.json")
    rows, benches = measure.run(cfg, key, mode, tmp_path / "build.json", tmp_path / "validate.json",
                                tmp_path / "bench.json")
    return built, {(r["m"], r["n"], r["k"]): r for r in rows}, next(r for r in benches if r["m"] == size)


def test_wrong_kernel_is_caught_by_validation_and_not_benchmarked(cfg, tmp_path):
    built, rows, bench = run_stages(cfg, tmp_path, "cpu/planted-wrong")
    assert built["status"] == "ok"
    assert {r["status"] for r in rows.values()} == {"failed"}
    assert bench["status"] == "skipped"
    assert bench["message"].startswith("not benchmarked: validation failed")
    assert "median_s" not in bench


def test_a_kernel_that_skips_work_once_warm_passes_validation_but_its_timing_is_not_published(cfg, tmp_path):
    cfg["timing"]["warmup_runs"] = 3  # as by default: the timed launches come after the kernel stopped working
    _, rows, bench = run_stages(cfg, tmp_path, "cpu/planted-stateful")
    assert {r["status"] for r in rows.values()} == {"ok"}  # validation sees only its first call
    assert bench["status"] == "failed"
    assert "its output is not the product of its inputs" in bench["message"], bench["message"]


def test_a_warm_up_slowed_by_a_busy_host_does_not_fail_an_honest_cpu_point(cfg, tmp_path):
    """The host/device agreement on a CPU: every warm-up call slow (a host busy with compiles until the samples
    begin) is no sign of work moved out of the timed region; the calls timed again after the samples say so."""
    cfg["timing"].update(warmup_runs=5, warmup_s=0.0)  # every call of the warm-up slow
    _, rows, bench = run_stages(cfg, tmp_path, "cpu/planted-slow-warm-up")
    assert {r["status"] for r in rows.values()} == {"ok"}
    assert bench["status"] == "ok", bench["message"]
    assert min(bench["warmup_host_s"][1:]) > 3 * bench["median_s"]  # the warm-up alone would have failed it


def test_a_long_kernel_right_after_its_validation_launches_no_more_to_warm_up(cfg, tmp_path):
    """A kernel whose call is longer than a pause that starts a new stretch of device work (Load.IDLE_GAP_S), right
    after its validation launched it at this shape: the validation's launches are its warm-up's (warmup_runs asks
    for no more), and they cover the seconds."""
    from gemmbench.measure import timing
    from gemmbench.run import rows

    delay_ms = 2000 * timing.Load.IDLE_GAP_S
    cfg["params"] = {"cpu/planted-tunable": {"delay_ms": delay_ms}}
    cfg["timing"].update(warmup_runs=1, warmup_s=delay_ms / 4e3, min_samples=3, max_samples=3, min_time_s=0)
    _, _, bench = run_stages(cfg, tmp_path, "cpu/planted-tunable")
    assert bench["status"] == "ok", bench["message"]
    assert bench["warmup_runs"] == bench["warmup_validation_launches"] == rows.VALIDATION_LAUNCHES


class _CpuHost:
    device = "cpu"

    def __init__(self, calls_s):
        self.calls_s = iter(calls_s)

    def host_time(self, run):
        run()
        return next(self.calls_s)


@pytest.mark.parametrize("sampled_s, again_s, fails", [(0.001, 0.010, True), (0.001, 0.001, False),
                                                     (0.008, 0.009, False)])
def test_a_cpu_point_whose_host_calls_stay_slow_after_its_samples_fails(sampled_s, again_s, fails):
    """Work outside the timed region keeps the host's calls slow when they are timed again after the samples, each
    right after a call timed as a sample is; a warm-up slowed by a busy host does not, nor a host whose load slows
    both calls of each pair alike (a multithreaded kernel on cores that the run's compiles take, as cpu/numba-tiled's
    threads on a GPU node: reports/examples/h200-first-run)."""
    from gemmbench.run import bench

    calls, sampled = [], []
    problem = bench._host_disagrees(_CpuHost([again_s] * bench.HOST_RECHECKS), lambda: calls.append(1), 0.001, 0.010,
                                    lambda: sampled.append(1) or sampled_s)
    assert (problem is not None) == fails and len(calls) == len(sampled) == bench.HOST_RECHECKS
    if fails:
        assert "work ran outside the timed region" in problem
    assert bench._host_disagrees(_CpuHost([]), calls.append, 0.001, 0.002, None) is None  # agreeing: none timed


def test_a_point_that_failed_keeps_its_history_when_a_later_run_passes_it(cfg, tmp_path, monkeypatch):
    """A rerun measures a failed point again; the `ok` it may then get says how often, and why, it failed before."""
    key, size = "cpu/planted-fails-first-time", 32
    cfg["timing"]["point_timeout_s"] = 600  # no watchdog is tested here: no bound a loaded machine could reach
    _, _, first = run_stages(cfg, tmp_path, key, size)
    assert first["status"] == "failed" and first["failures_before"] == 0
    monkeypatch.setenv("GEMMBENCH_TEST_RUN", "later")  # another environment: a worker of its own, as a later run's
    _, _, second = run_stages(cfg, tmp_path, key, size)
    assert second["status"] == "ok", second["message"]
    assert second["failures_before"] == 1
    assert second["failure_history"].startswith("failed: launch") and "not the product" in second["failure_history"]
    _, _, third = run_stages(cfg, tmp_path, key, size)  # kept as measured: the history stays with it
    assert third["status"] == "ok" and third["failures_before"] == 1


def test_a_point_much_slower_than_its_tuning_measured_is_flagged(cfg, tmp_path):
    """The check that would have caught cupy/07_vectorized at 22 TFLOP/s where its tuning had measured 35.7: the same
    kernel at a size class's own shape, on the same GPU model, slower than TUNING_SLACK times the tuning's time."""
    from gemmbench import plan
    from gemmbench.files import write_json
    from gemmbench.measure import devices

    gpu = plan.gpu_slug(devices.cpu_model())
    write_json(tmp_path / "tuning.json", {"gpu": gpu, "classes": {
        "32": {"params": {"delay_ms": 20}, "median_s": 0.004},  # the kernel sleeps 20 ms: five times slower here
        "128": {"params": {"delay_ms": 20}, "median_s": 1.0}}})  # measured slower than now: nothing to flag
    key = "cpu/planted-tunable"
    cfg["timing"]["point_timeout_s"] = 600  # no watchdog is tested here: no bound a loaded machine could reach
    build.run(cfg, key, "fp32", tmp_path / "build.json", tmp_path / "tuning.json")
    rows = measure.run(cfg, key, "fp32", tmp_path / "build.json", tmp_path / "validate.json",
                          tmp_path / "bench.json")[1]
    flagged, fine = (next(r for r in rows if r["m"] == n) for n in (32, 128))
    assert flagged["status"] == "ok" and flagged["slower_than_tuning"] > measure.TUNING_SLACK
    assert f"the time its tuning measured for this kernel and shape on {gpu}" in flagged["message"]
    assert fine["slower_than_tuning"] is None


def test_a_race_that_fires_now_and_then_passes_validation_but_its_timing_is_not_published(cfg, tmp_path):
    # enough timed launches for the planted race's draws to fire; no bound on how long they take
    cfg["timing"].update(min_samples=200, max_samples=200, budget_s=3600, point_timeout_s=3600)
    _, rows, bench = run_stages(cfg, tmp_path, "cpu/planted-rare-race")
    # the two launches that validated the timed shape were right (the draws are the same in every process); the
    # awkward shape's, after a number of timed launches that the machine's speed decides, may meet one that fires
    assert rows[(32, 32, 32)]["status"] == "ok"
    assert bench["status"] == "failed"
    assert "its output is not the product of its inputs" in bench["message"], bench["message"]


def test_a_store_past_the_end_of_the_output_fails_validation(cfg, tmp_path):
    _, rows, bench = run_stages(cfg, tmp_path, "cpu/planted-past-the-end")
    assert {r["status"] for r in rows.values()} == {"failed"}
    assert all("1 elements written outside the output" in r["message"] for r in rows.values())
    assert bench["status"] == "skipped"


def test_tf32_rounded_inputs_fail_fp32_validation(cfg, tmp_path):
    _, rows, bench = run_stages(cfg, tmp_path, "cpu/planted-tf32-inputs")
    assert {r["status"] for r in rows.values()} == {"failed"}
    assert all("relative error" in r["message"] for r in rows.values())
    assert bench["status"] == "skipped"


def test_bf16_operands_arrive_as_bfloat16_bits_and_an_fp32_product_of_them_passes(cfg, tmp_path):
    cfg["modes"] = ["bf16"]
    _, rows, bench = run_stages(cfg, tmp_path, "cpu/planted-bf16", mode="bf16")
    assert {r["status"] for r in rows.values()} == {"ok"}
    assert all(r["tolerance"] == checking.bound("bf16", shape[2]) for shape, r in rows.items())
    assert bench["status"] == "ok"


def test_an_output_rounded_to_bf16_fails_bf16_validation(cfg, tmp_path):
    cfg["modes"] = ["bf16"]
    _, rows, bench = run_stages(cfg, tmp_path, "cpu/planted-bf16-output", mode="bf16")
    assert {r["status"] for r in rows.values()} == {"failed"}
    assert all("relative error" in r["message"] for r in rows.values())
    assert bench["status"] == "skipped"


def test_hanging_kernel_ends_as_timeout_and_the_other_points_still_run(cfg, tmp_path):
    _, rows, bench = run_stages(cfg, tmp_path, "cpu/planted-hang")
    assert [r["status"] for r in rows.values()] == ["timeout"] * 3
    assert "killed" in rows[(32, 32, 32)]["message"]
    assert bench["status"] == "skipped" and "timeout" in bench["message"]


def test_crashing_kernel_is_an_error_row_and_later_points_still_run(cfg, tmp_path):
    _, rows, bench = run_stages(cfg, tmp_path, "cpu/planted-crash")
    assert rows[(128, 128, 128)]["status"] == "error"
    assert "signal" in rows[(128, 128, 128)]["message"]
    assert rows[(32, 32, 32)]["status"] == "ok" and rows[(7, 13, 5)]["status"] == "ok"  # 7x13x5 runs after the crash
    assert bench["status"] == "ok" and bench["median_s"] > 0


def test_size_cap_and_declared_limits_are_skipped_with_the_reason(cfg, tmp_path):
    cfg["max_size"] = {"cpu": 64}
    _, rows, bench = run_stages(cfg, tmp_path, "cpu/numpy-blas", size=128)
    assert rows[(128, 128, 128)]["status"] == "skipped"
    assert "max_size 64" in rows[(128, 128, 128)]["message"]
    assert rows[(32, 32, 32)]["status"] == "ok"
    assert bench["status"] == "skipped" and "max_size 64" in bench["message"]


@pytest.mark.parametrize("narrow_to, at_64", [(0, {20: "ok", 0: "ok", 13: "rejected"}), (1, {0: "ok"})])
def test_the_tune_stage_keeps_the_fastest_and_loses_only_refused_candidates(tmp_path, cpu_config, narrow_to, at_64):
    """Every candidate at each class, or (narrow_to) at a class at most twice the one below, only that class's
    fastest; each class's pick is audited."""
    cpu_config.update(variant_modules=["tests.planted"],
                      tune={"trials": 3, "size_classes": [32, 64], "narrow_to": narrow_to},
                      cache_dir=str(tmp_path / "cache"))
    cpu_config["timing"].update(min_samples=3, max_samples=3, min_time_s=0, warmup_runs=1, warmup_s=0)
    record = tune.run(configuration.validate(cpu_config), "cpu/planted-tunable", "fp32", "test-cpu",
                      tmp_path / "tune.json")
    statuses = {(t["size"], t["params"]["delay_ms"]): t["status"] for t in record["trials"]}
    assert statuses == {(32, 20): "ok", (32, 0): "ok", (32, 13): "rejected",
                        **{(64, delay): status for delay, status in at_64.items()}}
    assert {c["params"]["delay_ms"] for c in record["classes"].values()} == {0}
    assert [(a["size"], a["params"], a["status"]) for a in record["audits"]] == [
        (32, {"delay_ms": 0}, "ok"), (64, {"delay_ms": 0}, "ok")]
    for trial in (t for t in record["trials"] if t["status"] == "ok"):  # where its seconds went, as a point's
        assert trial["validate_s"] > 0 and trial["measure_s"] >= trial["kernel_s"] + trial["check_s"] > 0


def _one_trial_search(cpu_config: dict, tmp_path) -> dict:
    """The validated config of a one-trial search of the planted tunable variant at one size class, timed briefly."""
    cpu_config.update(variant_modules=["tests.planted"], tune={"trials": 1, "size_classes": [32]},
                      cache_dir=str(tmp_path / "cache"))
    cpu_config["timing"].update(min_samples=3, max_samples=3, min_time_s=0, warmup_runs=1, warmup_s=0)
    return configuration.validate(cpu_config)


def test_a_search_says_what_its_job_spent_before_searching(tmp_path, cpu_config, caplog):
    """A search holds the GPU from its job's start: its log says how long the process ran before the stage, and what
    the record's key and the GPU's facts took before the search began."""
    caplog.set_level(logging.INFO, logger="gemmbench")
    tune.run(_one_trial_search(cpu_config, tmp_path), "cpu/planted-tunable", "fp32", "test-cpu", tmp_path / "t.json")
    said = [record.getMessage() for record in caplog.records]
    stamped = next(i for i, line in enumerate(said) if "the record's key and the committed records' lookup" in line)
    searching = next(i for i, line in enumerate(said) if ": searching " in line)
    assert stamped < searching
    if sys.platform == "linux":  # a process's age is read from /proc
        assert "the job's process started" in said[0]


def test_a_search_that_holds_the_gpu_keys_its_record_with_the_toolchain_its_worker_reports(tmp_path, cpu_config,
                                                                                          monkeypatch):
    """A job that holds the GPU learns the toolchain and GPU from the resident worker that compiles and times its
    trials, not by importing CuPy itself: the job's own lookup is never called, and the record is keyed with the
    worker's versions (which, from the same environment, are the host's)."""
    from gemmbench.measure import provenance
    from gemmbench.tuning import records

    own = provenance.toolchain()

    def looked_up_here():
        raise AssertionError("the job looked up its own toolchain")

    monkeypatch.setattr(provenance, "toolchain", looked_up_here)
    cfg = _one_trial_search(cpu_config, tmp_path)
    record = tune.run(cfg, "cpu/planted-tunable", "fp32", "test-cpu", tmp_path / "t.json", holds_gpu=True)
    variant = common.variant_of(cfg, "cpu/planted-tunable")
    assert record["compilers"] == records.relevant(variant, own)
    assert record["key"] == records.key(variant, "fp32", record["settings"], with_compilers=own)
    assert records.host_gpu() is None  # a CPU worker reports no GPU


def _in_process(task, timeout_s, describe=None, on_row=None, log_rows=True):
    """supervise.run_task's rows, from the worker's loop run in this process (so that a test sees inside it)."""
    from gemmbench.run import worker

    got = {}
    worker.run(task, 0, {}, lambda event, **msg: got.update({msg["index"]: msg["row"]} if event == "row" else {}))
    return [got[i] for i in range(len(task.points))], None


def test_a_trial_validates_with_one_launch_and_a_pick_as_a_measured_point(tmp_path, cpu_config, monkeypatch):
    """A trial's samples test every launch after its validation (so one launch of it is enough to catch a kernel right
    only once); a pick's validation launches as a measured point's does."""
    from gemmbench.run import rows

    launched, validate = [], rows.validate_row

    def counted(variant, chosen, backend, task, point, launches=rows.VALIDATION_LAUNCHES):
        launched.append((point.stage, launches))
        return validate(variant, chosen, backend, task, point, launches)

    monkeypatch.setattr(rows, "validate_row", counted)
    cpu_config.update(variant_modules=["tests.planted"], tune={"trials": 3, "size_classes": [32]},
                      cache_dir=str(tmp_path / "cache"))
    monkeypatch.setattr("gemmbench.tuning.search.run_task", _in_process)
    record = tune.run(configuration.validate(cpu_config), "cpu/planted-tunable", "fp32", "test-cpu",
                      tmp_path / "tune.json")
    assert record["classes"]["32"]["params"] == {"delay_ms": 0}
    assert sorted(set(launched)) == [("", rows.TRIAL_VALIDATION_LAUNCHES), ("pick", rows.VALIDATION_LAUNCHES)]
    assert rows.TRIAL_VALIDATION_LAUNCHES < rows.VALIDATION_LAUNCHES


@pytest.mark.parametrize("stop_behind", [0, 1.25])
def test_a_trial_clearly_behind_the_fastest_at_its_shape_stops_after_its_first_samples(tmp_path, cpu_config,
                                                                                        stop_behind):
    """The defaults (no delay) are timed first; a candidate 20 ms slower per call stops after its first samples,
    its row says so, and the pick is as it was. With stop_behind 0 every trial samples in full, as committed
    searches did; only a search that stops keys its record with it."""
    from gemmbench.measure import timing

    cpu_config.update(variant_modules=["tests.planted"], params={"cpu/planted-tunable": {"delay_ms": 0}},
                      tune={"trials": 3, "size_classes": [32], "stop_behind": stop_behind},
                      cache_dir=str(tmp_path / "cache"))
    record = tune.run(configuration.validate(cpu_config), "cpu/planted-tunable", "fp32", "test-cpu",
                      tmp_path / "tune.json")
    trials = {t["params"]["delay_ms"]: t for t in record["trials"]}
    assert trials[0]["status"] == trials[20]["status"] == "ok" and trials[0]["stopped_by"] != "behind"
    if stop_behind:
        assert trials[20]["stopped_by"] == "behind" and "stopped behind" in trials[20]["message"]
        assert trials[20]["message"].startswith(f"{timing.BEHIND_SAMPLES} samples")
    else:
        assert trials[20]["stopped_by"] != "behind"
    assert record["classes"]["32"]["params"] == {"delay_ms": 0}
    assert record["settings"].get("stop_behind", 0) == stop_behind


def test_a_pick_that_fails_its_audit_fails_as_a_trial_and_its_class_picks_again(tmp_path, cpu_config, monkeypatch):
    """A trial has no audit (only a pick's time is used): a fault that fires once in a few dozen launches shows in
    the pick's. Here the audit of the fastest fails: it is a failed trial, and the class keeps the next."""
    from gemmbench.tuning import search

    audited = search.audit

    def fails_the_fastest(config, variant, mode, picked, compiled=False):
        return [{**row, "status": "failed", "message": "planted"} if row["params"] == {"delay_ms": 0} else row
                for row in audited(config, variant, mode, picked, compiled)]

    monkeypatch.setattr(search, "audit", fails_the_fastest)
    cpu_config.update(variant_modules=["tests.planted"], tune={"trials": 3, "size_classes": [32]},
                      cache_dir=str(tmp_path / "cache"))
    cpu_config["timing"].update(min_samples=3, max_samples=3, min_time_s=0, warmup_runs=1, warmup_s=0)
    record = tune.run(configuration.validate(cpu_config), "cpu/planted-tunable", "fp32", "test-cpu",
                      tmp_path / "tune.json")
    assert record["classes"]["32"]["params"] == {"delay_ms": 20}
    assert [(a["params"]["delay_ms"], a["status"]) for a in record["audits"]] == [(0, "failed"), (20, "ok")]
    lost = next(t for t in record["trials"] if t["params"] == {"delay_ms": 0})
    assert lost["status"] == "failed" and lost["message"] == "failed its audit as class 32's pick: planted"


def test_a_search_is_estimated_from_its_committed_trials_as_this_run_would_time_them(tmp_path, cpu_config,
                                                                                     monkeypatch):
    """The plan line's estimate of a search here, from a committed search of another GPU model: each trial modelled
    from its median under this run's tune timing (one stopped behind takes fewer samples), its pick's audit, and
    each point's cost beyond its launches as committed trials that kept their seconds spent it."""
    from gemmbench.tuning import records
    from kernels import registry

    monkeypatch.setattr(records, "COMMITTED", tmp_path / "tuning")
    config = configuration.validate({**cpu_config, "square_sizes": [32]})
    timing = config["tune"]["timing"]
    variant = registry.load(["tests.planted"])["cpu/planted-tunable"]
    path = records.committed_path("other-gpu", variant, "fp32")
    path.parent.mkdir(parents=True)
    assert search.estimate(config, variant, "fp32") is None  # nothing committed to estimate from

    def estimated(trials, stop_behind=0.0, settings=None):
        search._point_overhead_s.cache_clear()
        path.write_text(json.dumps({"settings": settings or {}, "trials": trials}))
        return search.estimate({**config, "tune": {**config["tune"], "stop_behind": stop_behind}}, variant, "fp32")

    fast, slow = ({"size": 32, "params": {"delay_ms": d}, "status": "ok", "median_s": m, "tflops": 1.0}
                  for d, m in ((0, 1e-3), (20, 2e-2)))
    alone = estimated([fast])
    assert alone == (search._timed_s(timing, 1e-3) + 2 * search._timed_s(timing, 1e-3, launches=2), "other-gpu")
    assert estimated([fast, slow], stop_behind=1.25)[0] < estimated([fast, slow])[0]  # the slow one stops behind
    kept = {**fast, "validate_s": 0.5, "measure_s": 1.5}  # far more than its launches: the points' overhead
    assert estimated([kept], settings={"timing": timing})[0] > alone[0] + 2 * 1.0
    assert estimated([kept], settings={"timing": {**timing, "budget_s": 9.0}}) == alone  # kept under another timing


def test_a_class_winner_that_collapses_at_a_size_its_class_serves_is_refused(tmp_path, cpu_config):
    """GROUP 16 is the fastest at both classes and ten times slower than GROUP 8 at 128, which class 64 serves
    (the nearest class in log scale): class 64 keeps GROUP 8 and says why, class 32 (serving nothing else) keeps
    GROUP 16, and every check is in the record."""
    cpu_config.update(variant_modules=["tests.planted"], variants=["cpu/planted-collapsing"],
                      square_sizes=[32, 64, 128], tune={"trials": 2, "size_classes": [32, 64]},
                      cache_dir=str(tmp_path / "cache"))
    cpu_config["timing"].update(min_samples=3, max_samples=3, min_time_s=0, warmup_runs=1, warmup_s=0)
    record = tune.run(configuration.validate(cpu_config), "cpu/planted-collapsing", "fp32", "test-cpu",
                      tmp_path / "tune.json")
    assert {t["params"]["GROUP"] for t in record["trials"] if t["size"] == 64 and t["median_s"] == min(
        u["median_s"] for u in record["trials"] if u["size"] == 64)} == {16}
    kept = record["classes"]["64"]
    assert kept["params"] == {"GROUP": 8} and kept["refused"]["params"] == {"GROUP": 16}
    assert kept["refused"]["worst_shape"] == "128x128x128" and kept["refused"]["share"] < 0.5
    assert min(kept["served"].values()) > 0.5
    assert record["classes"]["32"]["params"] == {"GROUP": 16} and "refused" not in record["classes"]["32"]
    assert {(c["shape"], c["params"]["GROUP"]) for c in record["checks"]} == {("128x128x128", 8), ("128x128x128", 16)}


def test_the_tune_code_job_adds_what_the_compiler_makes_of_each_pick_where_the_record_has_none(tmp_path, cpu_config,
                                                                                               monkeypatch):
    """The tune job (on the GPU) writes its picks; the tune_code job (beside it) adds their generated code, on which a
    record is migrated. A committed or transferred record brings its own, kept as it is."""
    import dataclasses

    from kernels import registry

    variant = dataclasses.replace(registry.load(["tests.planted"])["cpu/planted-tunable"],
                                  generated=lambda mode, params: {"made": params, "mode": mode})
    monkeypatch.setattr(tune, "variant_of", lambda config, key: variant)
    picked, out = tmp_path / "fp32.picked.json", tmp_path / "fp32.json"
    for generated, expected in [({}, {"32": {"made": {"delay_ms": 0}, "mode": "fp32"}}), ({"generated": None}, None)]:
        picked.write_text(json.dumps({"classes": {"32": {"params": {"delay_ms": 0}}}, **generated}))
        tune.code(cpu_config, variant.key, "fp32", picked, out)
        assert json.loads(out.read_text())["generated"] == expected


@pytest.mark.parametrize("timed_ahead", [False, True])
def test_a_variant_compiled_per_shape_has_its_checks_kernels_compiled_between_its_trials_and_its_checks(
        cpu_config, monkeypatch, timed_ahead):
    """A kernel specialised per shape needs one for each shape its class's checks run, and which candidates contend
    there is known only from the trials. The tune_trials job times them; the tune_check_compile job compiles the
    contenders at those shapes (`compile_checks`), beside the GPU's jobs; the tune job then only checks and audits
    the picks. Without that (`timed` None), the tune job compiles the checks' kernels itself before timing them."""
    import dataclasses

    from gemmbench.tuning import records, search
    from kernels import registry

    compiled, timed_points = [], []

    def compile_ahead(config, variant, mode, points, classes=None):
        compiled.extend((p.size_class, tuple(p.sizes.values()), p.params["delay_ms"]) for p in points)
        return 1, [None] * len(points)

    def measure_trials(config, variant, mode, points, describe, compiled=False, stop_behind=0.0):
        timed_points.extend((p.stage, p.size_class, tuple(p.sizes.values()), compiled) for p in points)
        return [{"status": "ok", "median_s": 1.0 + p.params["delay_ms"], "tflops": 1.0} for p in points]

    monkeypatch.setattr(search, "compile_ahead", compile_ahead)
    monkeypatch.setattr(search, "measure_trials", measure_trials)
    variant = dataclasses.replace(registry.load(["tests.planted"])["cpu/planted-tunable"], prepare=lambda *args: None)
    config = configuration.validate({**cpu_config, "variant_modules": ["tests.planted"], "square_sizes": [32, 64, 128],
                                     "tune": {"trials": 3, "size_classes": [32, 64], "narrow_to": 0}})
    settings = records.settings(config["tune"], variant)
    trials = search.time_trials(config, variant, "fp32", "test-cpu", settings, Path("none.json"), compiled=True)
    assert len(trials) == 6 and not compiled and {t[3] for t in timed_points} == {True}

    done = search.compile_checks(config, variant, "fp32", trials, settings["sizes"])
    contenders = search.contenders(trials, search.best_per_class(trials, settings["sizes"]), 64)
    assert set(compiled) == {(64, (128,) * 3, c["delay_ms"]) for c in contenders} and done["checks"] == len(compiled)

    timed_points.clear()
    record = search.search(config, variant, "fp32", "test-cpu", settings, "key", Path("none.json"), compiled=True,
                           timed=trials if timed_ahead else None)
    checks = [t for t in timed_points if t[2] == (128,) * 3]
    assert checks and {compiled_ahead for *_, compiled_ahead in checks} == {timed_ahead}
    assert len(timed_points) == len(checks) + len(record["audits"]) + (0 if timed_ahead else 6)


def test_a_search_split_into_trials_checks_compiled_and_picks_gives_the_record_one_job_would(tmp_path, cpu_config,
                                                                                          monkeypatch):
    """The three jobs of a search of a variant compiled per shape (tune_trials, tune_check_compile, tune), each a
    process of its own, hand over through their files: the tune job checks and audits the trials the first timed,
    times none of them again, and takes them only for the record's key."""
    import dataclasses

    from gemmbench.tuning import records

    cpu_config.update(variant_modules=["tests.planted"], square_sizes=[32, 64, 128],
                      tune={"trials": 3, "size_classes": [32, 64], "narrow_to": 0}, cache_dir=str(tmp_path / "cache"))
    cpu_config["timing"].update(min_samples=3, max_samples=3, min_time_s=0, warmup_runs=1, warmup_s=0)
    cfg = configuration.validate(cpu_config)
    planted = common.variant_of(cfg, "cpu/planted-tunable")
    monkeypatch.setattr(tune, "variant_of", lambda config, key: dataclasses.replace(planted, prepare=lambda *a: None))
    out = tmp_path / "fp32.picked.json"
    tune.compile_ahead(cfg, "cpu/planted-tunable", "fp32", "test-cpu", tune.compiled_path(out))
    timed = tune.trials(cfg, "cpu/planted-tunable", "fp32", "test-cpu", tmp_path / "fp32.trials.json")
    done = tune.compile_checks(cfg, "cpu/planted-tunable", "fp32", tmp_path / "fp32.trials.json",
                               tmp_path / "fp32.checks.json")
    assert len(timed["trials"]) == 6 and done["checks"] >= 1

    def times_again(*args, **kwargs):
        raise AssertionError("the tune job timed the trials again")
    monkeypatch.setattr(search, "time_trials", times_again)
    record = tune.run(cfg, "cpu/planted-tunable", "fp32", "test-cpu", out, timed=tmp_path / "fp32.trials.json")
    assert record["trials"] == timed["trials"] and record["checks"] and record["audits"]
    assert {c["params"]["delay_ms"] for c in record["classes"].values()} == {0}
    assert record["key"] == records.key(planted, "fp32", records.settings(cfg["tune"], planted))

    stale = tmp_path / "stale.trials.json"  # timed for other settings: searched again
    stale.write_text(json.dumps({**timed, "key": "another"}))
    with pytest.raises(AssertionError, match="timed the trials again"):
        tune.run(cfg, "cpu/planted-tunable", "fp32", "test-cpu", out, timed=stale)


def test_candidates_compiled_ahead_by_their_own_job_are_only_validated_and_timed_by_the_tune_job(tmp_path, cpu_config,
                                                                                            monkeypatch):
    """The tune_compile job compiles the search's trials into the shared cache; the tune job then compiles nothing
    itself and keeps the same fastest candidate."""
    from gemmbench.tuning import search

    cpu_config.update(variant_modules=["tests.planted"],
                      tune={"trials": 3, "size_classes": [32, 64], "narrow_to": 0}, cache_dir=str(tmp_path / "cache"))
    cpu_config["timing"].update(min_samples=3, max_samples=3, min_time_s=0, warmup_runs=1, warmup_s=0)
    cfg = configuration.validate(cpu_config)
    out = tmp_path / "tune.json"
    done = tune.compile_ahead(cfg, "cpu/planted-tunable", "fp32", "test-cpu", tune.compiled_path(out))
    assert done["trials"] == 6  # 3 candidates at 2 classes; delay 13 is refused where workers compiled ahead
    assert done["refused"] == (2 if done["workers"] > 1 else 0)

    def compiles_again(*args, **kwargs):
        raise AssertionError("the tune job compiled again")
    monkeypatch.setattr(search, "compile_ahead", compiles_again)
    record = tune.run(cfg, "cpu/planted-tunable", "fp32", "test-cpu", out)
    assert {c["params"]["delay_ms"] for c in record["classes"].values()} == {0}
    assert sum(t["status"] == "rejected" for t in record["trials"]) == 2


def test_a_deeper_search_keeps_a_committed_searchs_trials_and_covers_the_shallower_setting(tmp_path, cpu_config,
                                                                                          monkeypatch):
    """A long search spread over sittings: the trials a committed search timed are kept, not timed again, by a
    search of more trials (same seed and sizes), whose result then stands for the shallower setting too."""
    from gemmbench.tuning import records
    from kernels import registry

    monkeypatch.setattr(records, "COMMITTED", tmp_path / "config" / "tuning")
    cpu_config.update(variant_modules=["tests.planted"], cache_dir=str(tmp_path / "cache"))
    cpu_config["timing"].update(min_samples=3, max_samples=3, min_time_s=0, warmup_runs=1, warmup_s=0)
    variant = registry.load(["tests.planted"])["cpu/planted-tunable"]
    committed = records.committed_path("test-cpu", variant, "fp32")

    def search(trials):
        cfg = configuration.validate({**cpu_config, "tune": {"trials": trials, "size_classes": [32]}})
        return cfg, tune.run(cfg, "cpu/planted-tunable", "fp32", "test-cpu", tmp_path / f"tune-{trials}.json")

    shallow_cfg, shallow = search(2)
    committed.parent.mkdir(parents=True)
    cut_short = {**shallow["trials"][1], "status": "timeout"}  # that sitting's, maybe: timed again, not kept
    committed.write_text(json.dumps({**shallow, "trials": [shallow["trials"][0], cut_short]}))
    _, deep = search(3)
    assert deep["trials"][0] == shallow["trials"][0] and deep["trials"][1]["status"] != "timeout"
    committed.write_text(json.dumps(shallow))
    _, deep = search(3)
    assert deep["trials"][:2] == shallow["trials"] and len(deep["trials"]) == 3
    assert deep["settings"]["trials"] == 3 and deep["key"] != shallow["key"]
    committed.write_text(json.dumps(deep))
    settings = shallow_cfg["tune"]
    assert records.committed(settings, variant, "fp32", "test-cpu")[1]["key"] == deep["key"]
    assert records.committed({**settings, "trials": 4}, variant, "fp32", "test-cpu")[1] is None
    assert records.committed({**settings, "seed": 5}, variant, "fp32", "test-cpu")[1] is None


def test_a_variants_own_search_proposes_and_the_tune_stage_compiles_validates_and_times(tmp_path, cpu_config):
    """The autotuner's contract: the search hands over parameter sets, the harness measures them (compiled ahead,
    then validated and timed in its worker; a refused one comes back as such), and the sittings are kept."""
    cpu_config.update(variant_modules=["tests.planted"], tune={"autotuner": {"trials": 3, "size_classes": [32]}},
                      cache_dir=str(tmp_path / "cache"))
    cpu_config["timing"].update(min_samples=3, max_samples=3, min_time_s=0, warmup_runs=1, warmup_s=0)
    record = tune.run(configuration.validate(cpu_config), "cpu/planted-searching", "fp32", "test-cpu",
                         tmp_path / "tune.json")
    found = record["classes"]["32"]
    assert found["params"] == {"delay_ms": 0} and found["records"] == ["ok", "rejected", "ok"]
    assert [s["candidates"] for s in found["sittings"]] == [3] and found["tune_s"] > 0
    assert json.loads((tmp_path / "tune" / "32" / "sittings.json").read_text()) == found["sittings"]


def test_each_tuned_class_is_validated_at_an_off_tile_shape_with_its_own_parameters(tmp_path, cpu_config):
    cpu_config.update(variant_modules=["tests.planted"], square_sizes=[32, 64], validation_shapes=[[7, 13, 5]],
                      cache_dir=str(tmp_path / "cache"))
    cfg = configuration.validate(cpu_config)
    tuned = {"gpu": "test-cpu", "classes": {"32": {"params": {"delay_ms": 0}}, "64": {"params": {"delay_ms": 1}}}}
    (tmp_path / "tune.json").write_text(json.dumps(tuned))
    build.run(cfg, "cpu/planted-tunable", "fp32", tmp_path / "build.json", tmp_path / "tune.json")
    rows = measure.run(cfg, "cpu/planted-tunable", "fp32", tmp_path / "build.json", tmp_path / "validate.json")[0]
    params = {(r["m"], r["n"], r["k"]): json.loads(r["params"]) for r in rows}
    assert params[(31, 33, 29)] == {"delay_ms": 0} and params[(63, 65, 61)] == {"delay_ms": 1}
    assert {r["status"] for r in rows} == {"ok"} and len(rows) == 5  # 2 sweep, 1 listed, 2 per class


def test_a_variant_specialised_per_shape_is_compiled_ahead_by_its_build(cfg, tmp_path):
    """Every shape validation and bench will run is compiled by the build (which runs beside a job measuring on the
    GPU); a shape the variant refuses is named in the build record, and its validation reports the refusal without
    compiling it again."""
    refusals = tmp_path / "cache" / "planted-specialised-refusals"
    built = build.run(cfg, "cpu/planted-specialised", "fp32", tmp_path / "build.json")
    assert built["status"] == "ok" and "compiled ahead for 2 of 3 shapes" in built["message"]
    assert built["prepare_refused"] == {"7x13x5": "no kernel for 7x13x5"} and "prepare_failed" not in built
    assert refusals.read_text().count("\n") == 1  # by a compile worker, or by the build's on one core
    kernels = sorted((tmp_path / "cache" / "planted-specialised").iterdir())
    assert [p.name for p in kernels] == ["128x128x128", "32x32x32"]
    if (os.cpu_count() or 1) > 1:  # compiled by parallel workers, one shape each here
        assert len({p.read_text() for p in kernels}) == 2
    _, rows, bench = run_stages(cfg, tmp_path, "cpu/planted-specialised")
    assert rows[(7, 13, 5)]["status"] == "error" and "no kernel for 7x13x5" in rows[(7, 13, 5)]["message"]
    assert rows[(32, 32, 32)]["status"] == "ok" and bench["status"] == "ok"
    assert refusals.read_text().count("\n") == 2  # the second build's, and none by validation


@pytest.mark.parametrize("code, oom_killed, status, says", [
    (-9, True, "oom", "OOM killer"),  # SIGKILL while the cgroup's oom_kill count rose
    (-9, False, "error", "killed by signal 9"),
    (-6, True, "error", "killed by signal 6"),  # an abort is not the OOM killer's
    (1, False, "error", "crash"),
])
def test_a_worker_killed_for_memory_is_oom_and_other_deaths_are_errors(code, oom_killed, status, says):
    from gemmbench.run.supervise import exit_failure

    row = exit_failure(code, oom_killed, "the worker's last words")
    assert row["status"] == status and says in row["message"] and "last words" in row["message"]


def test_a_resident_workers_crash_is_named_from_its_log_even_where_its_end_is_a_list_of_modules(tmp_path):
    """A worker that an earlier job started: its exit status is not this job's to read, but faulthandler's first
    line names the signal, and the tail of the log keeps that line where its list of extension modules fills the
    end."""
    from gemmbench.run.supervise import _stderr_tail, exit_failure

    log = tmp_path / "worker.log"
    log.write_text("an earlier task's lines\nFatal Python error: Segmentation fault\n\nCurrent thread:\n"
                   + "Extension modules: " + ", ".join(f"module{i}" for i in range(400)) + "\n")
    stderr = _stderr_tail(log)
    assert stderr.startswith("Fatal Python error: Segmentation fault ... ") and stderr.endswith("module399")
    row = exit_failure(None, False, stderr)
    assert row["status"] == "error" and "killed by a signal: Segmentation fault" in row["message"]
    assert "not known here" in exit_failure(None, False, "no words")["message"]


@pytest.mark.parametrize("exc", [
    MemoryError(),
    RuntimeError("[CUDA_ERROR_OUT_OF_MEMORY] Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY"),  # Numba
    RuntimeError("CUBLAS_STATUS_ALLOC_FAILED"),  # cuBLAS
    type("OutOfMemoryError", (Exception,), {})("Out of memory allocating 1,024 bytes"),  # CuPy
])
def test_running_out_of_device_memory_is_oom_in_every_family(exc):
    from gemmbench.run.rows import failure_row

    assert failure_row(exc)["status"] == "oom"


def test_tf32_with_the_override_that_turns_it_off_is_refused(cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    cfg.update(modes=["tf32"])
    built = build.run(cfg, "cpu/planted-tf32-mode", "tf32", tmp_path / "build.json")
    assert built["status"] == "error" and "NVIDIA_TF32_OVERRIDE=0" in built["message"]


class Reads(dict):
    """A config that records which sections are read."""

    def __init__(self, sections):
        super().__init__(sections)
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)


@pytest.mark.parametrize("workload, key", [("gemm", "cpu/planted-tunable"), ("b2b", "cpu/b2b_unfused_numpy-blas")])
def test_each_stage_runs_on_what_its_rule_passes_and_reads_all_of_it(tmp_path, cpu_config, workload, key):
    """A stage given only its sections (config_for, its rule's params) runs, and reads every one of them: the
    params are what the stage reads, so changing one re-runs its jobs and changing another section does not."""
    cpu_config.update(variant_modules=["tests.planted"], workloads=[workload], tune={"trials": 2, "size_classes": [32]},
                      cache_dir=str(tmp_path / "cache"), params={key: {}}, max_size={"cpu": 4096, "cupy": 64})
    if workload == "b2b":
        cpu_config["b2b"] = {"m": [64], "k0": [16], "n0": [16], "n1": [16], "validation_shapes": [[7, 5, 3, 2]]}
    full = configuration.validate(cpu_config)
    paths = {name: tmp_path / f"{name}.json" for name in ("tune", "build", "validate", "bench")}
    run = {"tune": lambda c: tune.run(c, key, "fp32", "test-cpu", paths["tune"]),
           "build": lambda c: build.run(c, key, "fp32", paths["build"],
                                           paths["tune"] if workload == "gemm" else None),
           "measure": lambda c: measure.run(c, key, "fp32", paths["build"], paths["validate"], paths["bench"])}
    for stage in run if workload == "gemm" else ("build", "measure"):
        given = Reads(common.config_for(full, stage, key, "fp32"))
        run[stage](given)
        assert given.read == set(given), (stage, set(given) - given.read)
        assert dict(given)["params"] == {key: {}}  # narrowed to this variant (and max_size to it or its family)
        assert dict(given).get("max_size", {"cpu": 4096}) == {"cpu": 4096}


def _tuned_unstable(tmp_path) -> Path:
    """A tuning record of the planted unstable compiler: each class's winner timed as a 125-register kernel."""
    record = {"gpu": "test-cpu", "classes": {"32": {"params": {"delay_ms": 0}}, "128": {"params": {"delay_ms": 1}}},
              "trials": [{"size": size, "params": {"delay_ms": delay}, "registers": 125}
                         for size, delay in ((32, 0), (128, 1))]}
    path = tmp_path / "tune.json"
    path.write_text(json.dumps(record))
    return path


def test_a_kernel_compiled_unlike_its_tuning_is_compiled_again_and_replaces_the_cached_one(cfg, tmp_path, monkeypatch):
    """NVRTC 13.5 now and then allocates registers otherwise: a build that cached such a kernel (137 registers where
    its tuning timed 125) compiles again into a fresh cache, and the kernel that matches replaces the cached one, so
    that the measure jobs load what the tuning timed (an H100 run timed rung 07 37% slower without this)."""
    monkeypatch.setenv("PLANTED_COMPILES", str(tmp_path / "compiles.log"))
    key = "cpu/planted-unstable-compiler"
    row = build.run(cfg, key, "fp32", tmp_path / "build.json", _tuned_unstable(tmp_path))
    assert {size: facts["registers"] for size, facts in row["classes"].items()} == {"32": 125, "128": 125}
    assert "compiled again" in row["message"]
    cached = tmp_path / "cache" / "cupy"
    assert {json.loads(p.read_text())["registers"] for p in cached.glob("planted-*.json")} == {125}
    # the next job that loads the kernel from the run's cache gets the one its tuning timed
    rows = measure.run(cfg, key, "fp32", tmp_path / "build.json", tmp_path / "validate.json")[0]
    assert {r["status"] for r in rows} == {"ok"}


def test_a_compiler_that_never_makes_the_tuned_kernel_is_said_so_in_the_build_row(cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("PLANTED_COMPILES", str(tmp_path / "compiles.log"))
    monkeypatch.setenv("PLANTED_ALWAYS_ODD", "1")
    row = build.run(cfg, "cpu/planted-unstable-compiler", "fp32", tmp_path / "build.json",
                       _tuned_unstable(tmp_path))
    assert row["status"] == "ok" and row["classes"]["32"]["registers"] == 137
    assert "built vs tuned: {'32': (137, 125), '128': (137, 125)}" in row["message"]
    assert len((tmp_path / "compiles.log").read_text().splitlines()) == 2 * (1 + build.REBUILDS)  # two classes


def test_a_measure_job_loads_the_kernel_without_reading_its_costly_facts(cfg, tmp_path, monkeypatch):
    """A build record holds every fact of the build (Numba's PTX and SASS facts cost a second or more per kernel);
    the measure job, which builds the kernel again from the run's caches only to launch it, reads none of them."""
    reads = tmp_path / "reads.log"
    monkeypatch.setenv("PLANTED_FACT_READS", str(reads))
    built, rows, bench = run_stages(cfg, tmp_path, "cpu/planted-costly-facts")
    assert built["status"] == "ok" and built["disassembled"] is True
    assert {r["status"] for r in rows.values()} | {bench["status"]} == {"ok"}
    assert reads.read_text().splitlines() == ["read"]  # the build's, not the measure job's


def _fake_ncu(tmp_path) -> str:
    """An executable `ncu` that runs tests/fake_ncu.py."""
    script = tmp_path / "ncu"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).parent / 'fake_ncu.py'} \"$@\"\n")
    script.chmod(0o755)
    return str(script)


def test_the_profile_stage_runs_the_worker_under_the_profiler_and_keeps_its_counters(cfg, tmp_path):
    """The stage starts the worker under ncu with the fixed metric set and keeps one row per kernel the profiler
    reported (here the committed H100 export, which fake_ncu writes), with the point's shape and parameters."""
    cfg["profile"].update(ncu=_fake_ncu(tmp_path), profiled_sizes=[32])
    key = "cpu/planted-tunable"
    build.run(cfg, key, "fp32", tmp_path / "build.json")
    rows = profile.run(cfg, key, "fp32", tmp_path / "build.json", tmp_path / "profile.json")
    assert [(r["status"], r["m"], r["registers"]) for r in rows] == [("ok", 32, 226.0)]
    assert rows[0]["kernel"].startswith("void sgemm_async_transpose<128, 256, 32")
    assert json.loads(rows[0]["params"]) == {"delay_ms": 20}
    assert (tmp_path / "profile" / "32x32x32.csv").exists()  # the profiler's own output, kept


@pytest.mark.parametrize("why", ["missing", "restricted"])
def test_without_ncu_or_its_counters_every_point_ends_skipped_saying_why(cfg, tmp_path, monkeypatch, why):
    cfg["profile"].update(ncu="no-such-ncu" if why == "missing" else _fake_ncu(tmp_path), profiled_sizes=[32, 128])
    monkeypatch.setenv("FAKE_NCU_RESTRICTED", "1")
    build.run(cfg, "cpu/planted-tunable", "fp32", tmp_path / "build.json")
    rows = profile.run(cfg, "cpu/planted-tunable", "fp32", tmp_path / "build.json", tmp_path / "profile.json")
    assert [r["status"] for r in rows] == ["skipped", "skipped"]
    assert all(("no 'no-such-ncu' on PATH" if why == "missing" else "not permitted") in r["message"] for r in rows)


@pytest.mark.parametrize("shares, kept", [
    ({"16": {"a": 1.0, "b": 0.3}, "8": {"a": 0.9, "b": 1.0}}, "8"),  # collapses at b: refused
    ({"16": {"a": 1.0, "b": 0.995}, "8": {"a": 0.99, "b": 1.0}}, "16"),  # a near tie keeps the fastest
    ({"16": {"a": 1.0, "b": 0.97}, "8": {"a": 0.999, "b": 1.0}, "4": {"a": 0.98, "b": 0.99}}, "8"),
])
def test_a_class_keeps_its_fastest_unless_another_holds_up_clearly_better(shares, kept):
    assert search.kept_of(shares, "16") == kept
