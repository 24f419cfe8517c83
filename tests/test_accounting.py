"""Every timed launch accounted for, on the CPU: the planted cheats are caught under every timing the project ships,
each with its own message, the variant after one meets a process as fresh as the first, Freivalds' test and the
error bound tell honest fp32 from what is not, every reported time is gated, and the CLI times the shape it names."""
import re

import numpy as np
import pytest

from gemmbench import ROOT, configuration
from gemmbench import __main__ as cli
from gemmbench.measure import checking, devices
from gemmbench.measure.ledger import Ledger
from gemmbench.stages import build, measure
from tests.timings import TIMINGS


def run_stages(cpu_config, tmp_path, key, timing):
    cpu_config.update(variant_modules=["tests.planted"], square_sizes=[48], validation_shapes=[[7, 13, 5]],
                      cache_dir=str(tmp_path / "cache"), timing=dict(TIMINGS[timing]))
    cfg = configuration.validate(cpu_config)
    build.run(cfg, key, "fp32", tmp_path / "build.json")
    checked, timed = measure.run(cfg, key, "fp32", tmp_path / "build.json", tmp_path / "validate.json",
                                    tmp_path / "bench.json")
    return checked, timed[0]


NOT_THE_PRODUCT = "its output is not the product of its inputs"
NOT_FP32 = "times the honest fp32 error at k"


@pytest.mark.parametrize("timing", TIMINGS)
@pytest.mark.parametrize("key, stage, says", [
    ("cpu/planted-stateful", "bench", NOT_THE_PRODUCT),
    ("cpu/planted-half-once-warm", "bench", NOT_THE_PRODUCT),
    ("cpu/planted-pointer-cache", "bench", NOT_THE_PRODUCT),
    ("cpu/planted-rare-swap", "bench", NOT_THE_PRODUCT),
    ("cpu/planted-unreset-counter", "validate", "launch 2 of 2"),
    ("cpu/planted-late-work", "validate", "outputs are NaN"),
    ("cpu/planted-thread-per-call", "bench", "new thread(s) appeared"),
    ("cpu/planted-pooled-thread", "bench", "not yet written when the timer stopped"),
    ("cpu/planted-hook-on-stop", "bench", "a profiling hook (sys.setprofile) is installed"),
    ("cpu/planted-switch-interval", "bench", "switch interval was changed"),
    ("cpu/planted-reference-writer", "validate", "fp64 reference was written while the variant ran"),
    ("cpu/planted-leaves-thread", "validate", "left 1 thread(s) running after its point"),
    ("cpu/planted-bf16-composed", "validate", NOT_FP32),
    ("cpu/planted-tf32-inputs", "validate", NOT_FP32),
    ("cpu/planted-strassen", "validate", "an element's error is"),
])
def test_every_cheat_is_caught_under_every_shipped_timing(cpu_config, tmp_path, key, stage, says, timing):
    checked, timed = run_stages(cpu_config, tmp_path, key, timing)
    assert timed["status"] != "ok"
    if stage == "validate":
        assert checked[0]["status"] == "failed" and says in checked[0]["message"], checked[0]["message"]
    else:
        # each is right where validation looks before its timing (the awkward shape's validation, in the same worker
        # after the timing, may already meet a fault that the timed launches set off)
        assert checked[0]["status"] == "ok", checked[0]["message"]
        assert timed["status"] == "failed" and says in timed["message"], timed["message"]


@pytest.mark.parametrize("timing", TIMINGS)
@pytest.mark.parametrize("key", ["cpu/planted-unobserved", "cpu/planted-content-cache"])
def test_a_cheat_that_cannot_hit_is_published_with_the_time_of_its_work(cpu_config, tmp_path, key, timing):
    """A cheat that computes only while the output holds the poison, or replays products kept by their inputs'
    content (signs undone): every timed launch has fresh inputs and a poisoned output, so it always works."""
    from tests.planted import CHEATS

    _, timed = run_stages(cpu_config, tmp_path, key, timing)
    assert timed["status"] == "ok", timed["message"]
    assert min(timed["sample_device_s"] + timed["sample_batched_s"]) >= CHEATS[key.split("/")[1]].WORK_S
    assert timed["min_s"] >= CHEATS[key.split("/")[1]].WORK_S


@pytest.mark.parametrize("control", ["cpu/planted-leaves-thread", "cpu/planted-hook-on-stop",
                                     "cpu/planted-reference-writer", "cpu/planted-switch-interval"])
def test_the_variant_measured_after_a_control_meets_a_fresh_worker_or_its_own_references(
        cpu_config, tmp_path, caplog, control):
    """In one run's resident worker: an honest variant, a control that leaves state behind (a thread at work, a hook,
    a written reference, another switch interval), then the honest variant again: it is `ok`, in a fresh worker
    where the control left the process otherwise than it found it, and checked against references of its own."""
    import logging

    cpu_config.update(variant_modules=["tests.planted"], square_sizes=[64], validation_shapes=[[7, 13, 5]],
                      cache_dir=str(tmp_path / "cache"))
    cfg = configuration.validate(cpu_config)
    caplog.set_level(logging.INFO, logger="gemmbench")
    rows = {}
    for i, key in enumerate(["cpu/numpy-blas", control, "cpu/numpy-blas"]):
        build.run(cfg, key, "fp32", tmp_path / f"build{i}.json")
        rows[i] = measure.run(cfg, key, "fp32", tmp_path / f"build{i}.json", tmp_path / f"validate{i}.json",
                                 tmp_path / f"bench{i}.json")
    control_rows = rows[1][0] + rows[1][1]
    assert any(r["status"] == "failed" for r in control_rows), control_rows
    honest = rows[2][0] + rows[2][1]
    assert all(r["status"] == "ok" for r in honest), [r["message"] for r in honest]
    workers = [m.group(1) for m in (re.search(r"worker: (started|resident, reused)", r.getMessage())
                                    for r in caplog.records) if m]
    if control != "cpu/planted-reference-writer":  # its references are computed again; the process is as it was
        assert workers[-1] == "started", workers


def test_freivalds_test_passes_the_product_and_sees_a_kept_one_a_missing_tile_and_nan():
    cpu = devices.Backend()
    operands = cpu.inputs([(64, 48), (48, 32)], 1)
    product = np.matmul(*operands)
    projected = cpu.project_inputs(operands, 32, key=5)
    into = np.zeros(2)
    cpu.project_output(product, projected, into)
    assert checking.projection_verdict([tuple(into)], "fp32", 48) is None
    stale = np.matmul(*cpu.inputs([(64, 48), (48, 32)], 2))
    tile = product.copy()
    tile[:8, :8] = 0
    poisoned = product.copy()
    poisoned[3, 3] = np.nan
    for wrong in (stale, tile, poisoned):
        cpu.project_output(wrong, projected, into)
        assert "not the product of its inputs" in checking.projection_verdict([tuple(into)], "fp32", 48)


def test_fresh_content_is_new_every_sample_and_the_drawn_samples_are_made_again_from_their_keys():
    cpu = devices.Backend()
    operands = cpu.inputs([(8, 4), (4, 6)], 1)
    out, buffer = cpu.poisoned_output((8, 6))
    ledger = Ledger(cpu, operands, out, buffer, seed=1)
    seen = []
    for _ in range(4):
        ledger.before()
        assert np.isnan(ledger.out).all()  # poisoned before every launch
        seen.append(ledger.operands[0].copy())
        np.matmul(*ledger.operands, out=ledger.out)
        ledger.after()
    assert all(not np.array_equal(seen[i], seen[j]) for i in range(4) for j in range(i))
    assert ledger.problem("fp32", 4) is None
    for _, inputs, held in ledger.held_outputs():
        assert np.array_equal(np.matmul(*inputs), held)
    for mode in ("fp32", "bf16"):  # the same key, the same content
        x, y = cpu.inputs([(16, 8), (16, 8)], 3, mode)
        cpu.fill_random(x, 7)
        cpu.fill_random(y, 7)
        assert np.array_equal(x, y)


@pytest.mark.parametrize("held", [0, 2])
def test_a_ledger_draws_as_many_samples_for_a_full_comparison_as_it_is_told(held):
    """A point's ledger draws HELD samples; a search's trial's draws none (its pick's audit does), and its samples'
    Freivalds tests still see a kept product."""
    cpu = devices.Backend()
    ledger = Ledger(cpu, cpu.inputs([(8, 4), (4, 6)], 1), *cpu.poisoned_output((8, 6)), seed=1, held=held)
    kept = None
    for sample in range(4):
        ledger.before()
        np.matmul(*ledger.operands, out=ledger.out)
        if sample == 3:
            ledger.out[:] = kept  # the first sample's product, kept
        kept = ledger.out.copy() if kept is None else kept
        ledger.after()
    assert len(list(ledger.held_outputs())) == held
    assert NOT_THE_PRODUCT in ledger.problem("fp32", 4)


def test_an_honest_fp32_product_is_within_a_quarter_of_the_bound_and_the_bound_follows_the_mode(cpu_config):
    """On inputs with rows and columns scaled over 2^±12, at every shape of the CPU default and the test config,
    NumPy's fp32 product errs by at most a quarter of the fp32 bound; TF32-rounded inputs and BF16 pieces do not
    pass as fp32, and TF32 passes as tf32."""
    from tests.planted import bf16_split, strassen, tf32_rounded

    cpu = devices.Backend()
    shapes = [(n, n, n) for n in (48, 64, 128, 256)] + [tuple(s) for s in configuration.load(
        ROOT / "config" / "cpu.yaml")["validation_shapes"]]
    for m, n, k in shapes:
        a, b = cpu.inputs([(m, k), (k, n)], 11, scaled=True)
        wide = [devices.widened(np, x) for x in (a, b)]
        reference, scale = wide[0] @ wide[1], np.sqrt((wide[0] ** 2) @ (wide[1] ** 2))

        def units(c, mode="fp32"):
            errors = cpu.errors(reference, c, scale)
            return checking.error_units(errors, mode, k), checking.verdict({**errors, "outside_writes": 0}, mode, k,
                                                                           c.size)[0]
        honest, status = units(a @ b)
        assert status == "ok" and honest["error_units"] <= checking.RMS_UNITS / 4, (m, n, k, honest)
        assert honest["max_error_units"] <= checking.MAX_UNITS / 4, (m, n, k, honest)
        tf32 = tf32_rounded(a) @ tf32_rounded(b)
        assert units(tf32)[1] == "failed" and units(tf32, "tf32")[1] == "ok", (m, n, k)
        if 1 < k <= 256:  # at longer reductions fp32's own rounding reaches a split product's
            (ah, al), (bh, bl) = bf16_split(a), bf16_split(b)
            assert units(ah @ bh + (ah @ bl + al @ bh))[1] == "failed", (m, n, k)
        if not (m % 2 or n % 2 or k % 2):
            assert units(strassen(a, b))[1] == "failed", (m, n, k)


def test_every_reported_time_is_gated_and_a_device_without_a_peak_is_unchecked():
    device = {"device": "cpu", "peak_tflops": {"fp32": 1.0}}
    flops = 2.0 * 1000**3
    honest = {"median_s": 0.01, "min_s": 0.009}
    assert checking.gate(flops, 0, honest, device, "fp32", "hot") == (None, "checked")
    for name in ("min_s", "single_median_s"):
        refused, _ = checking.gate(flops, 0, {**honest, name: 1e-5}, device, "fp32", "hot")
        assert refused and "above the device's fp32 peak" in refused
    refused, gate = checking.gate(flops, 0, honest, {"device": "cuda", "gpu": "Future GPU", "peak_tflops": {}},
                                  "fp32", "hot")
    assert refused is None and gate.startswith("unchecked: no known fp32 peak for Future GPU")


def test_the_cpu_has_a_peak_and_gpus_after_hopper_have_rates():
    peak, basis = devices.cpu_peak()
    assert peak["fp32"] > 0 and "logical cores" in basis
    for cc in ("10.0", "12.0"):
        assert devices.FLOP_PER_CLOCK_PER_SM[cc]["fp32"] > 0


def test_the_cli_times_the_shape_it_names_within_the_cpus_peak(capsys, monkeypatch):
    """The README's example shape: timed as 1000x999x1001, not as a 1x1x1 sweep point with that shape's FLOPs."""
    code = cli.main(["--config", str(ROOT / "config" / "cpu.yaml"), "run", "cpu/numpy-blas",
                     "--shape", "1000x999x1001"])
    out = capsys.readouterr().out
    assert code == 0, out
    tflops = float(re.search(r"\(([\d.]+) TFLOP/s\)", out).group(1))
    assert 0 < tflops <= devices.cpu_peak()[0]["fp32"], out
    assert "timing gate: checked" in out


def test_fp32_and_tf32_points_of_one_shape_share_one_kept_reference(monkeypatch):
    """Both modes store float32 inputs, made from the shape's seed alone: their fp64 reference is one product,
    computed once per worker; bf16's inputs are other numbers (rounded to bfloat16), with a reference of their own."""
    from gemmbench import workloads
    from gemmbench.run import operands
    from gemmbench.run.task import Point

    monkeypatch.setattr(operands, "REFERENCES", operands.References())
    backend, gemm, point = devices.Backend(), workloads.get("gemm"), Point({"m": 48, "n": 40, "k": 56}, seed=5)
    computed = {}
    for mode in ("fp32", "tf32", "bf16"):
        inputs = backend.inputs(gemm.operands(point.sizes), point.seed, mode, scaled=True)
        computed[mode] = operands.kept_reference(gemm, backend, inputs, point, mode)
    assert computed["fp32"][1] > 0 and computed["tf32"] == (computed["fp32"][0], 0.0) and computed["bf16"][1] > 0
    assert not np.array_equal(computed["bf16"][0][0], computed["fp32"][0][0])
