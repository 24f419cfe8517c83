"""Every timed launch accounted for, on the CPU: the planted cheats are caught under every timing the project ships,
the fingerprint sees order and sign, every reported time is gated, and the CLI times the shape it names."""
import re

import numpy as np
import pytest

from gemmbench import __main__ as cli
from gemmbench import config, stages
from gemmbench.measure import backend as backends
from gemmbench.measure import checking
from gemmbench.measure.ledger import Ledger, negate
from tests.timings import TIMINGS


def run_stages(cpu_config, tmp_path, key, timing):
    cpu_config.update(variant_modules=["tests.planted"], sizes=[48], validation_shapes=[[7, 13, 5]],
                      cache_dir=str(tmp_path / "cache"), timing=dict(TIMINGS[timing]))
    cfg = config.validate(cpu_config)
    stages.build(cfg, key, "fp32", tmp_path / "build.json")
    checked, timed = stages.measure(cfg, key, "fp32", tmp_path / "build.json", tmp_path / "validate.json",
                                    tmp_path / "bench.json")
    return checked, timed[0]


DIFFERS = "differs from the first sample's, bit for bit"


@pytest.mark.parametrize("timing", TIMINGS)
@pytest.mark.parametrize("key, stage, says", [
    ("cpu/planted-stateful", "bench", DIFFERS),
    ("cpu/planted-half-once-warm", "bench", DIFFERS),
    ("cpu/planted-pointer-cache", "bench", DIFFERS),
    ("cpu/planted-rare-swap", "bench", DIFFERS),
    ("cpu/planted-unreset-counter", "validate", "launch 2 of 2"),
    ("cpu/planted-late-work", "validate", "outputs are NaN"),
])
def test_every_cheat_is_caught_under_every_shipped_timing(cpu_config, tmp_path, key, stage, says, timing):
    checked, timed = run_stages(cpu_config, tmp_path, key, timing)
    assert timed["status"] != "ok"
    if stage == "validate":
        assert checked[0]["status"] == "failed" and says in checked[0]["message"], checked[0]["message"]
    else:
        # each is right where validation looks before its timing (the awkward shape's validation, in the same worker
        # after the timing, may already meet a fault that the timed launches set off)
        assert checked[0]["status"] == "ok"
        assert timed["status"] == "failed" and says in timed["message"], timed["message"]


@pytest.mark.parametrize("timing", TIMINGS)
def test_a_cheat_that_works_only_when_observed_is_published_with_the_time_of_its_work(cpu_config, tmp_path, timing):
    from tests.planted import CHEATS

    _, timed = run_stages(cpu_config, tmp_path, "cpu/planted-unobserved", timing)
    assert timed["status"] == "ok", timed["message"]
    assert min(timed["sample_device_s"]) >= CHEATS["planted-unobserved"].WORK_S


def test_the_fingerprint_sees_a_swap_a_changed_bit_and_undoes_a_negation():
    cpu = backends.create("cpu")
    out = np.random.default_rng(0).random((64, 48), dtype=np.float32) - 0.5
    out[3, 5] = 0.0  # a sum that is exactly zero is +0 whatever the inputs' sign
    prints = np.zeros(5, dtype=np.uint64)
    cpu.fingerprint(out, 1, 7, prints[0:1])
    swapped = out.copy()
    swapped[0, 0], swapped[-1, -1] = out[-1, -1], out[0, 0]
    cpu.fingerprint(swapped, 1, 7, prints[1:2])
    changed = out.copy()
    changed.view(np.uint32)[10, 10] ^= 1
    cpu.fingerprint(changed, 1, 7, prints[2:3])
    negated = -out
    negated[3, 5] = 0.0
    cpu.fingerprint(negated, -1, 7, prints[3:4])
    cpu.fingerprint(out, 1, 8, prints[4:5])  # another salt: another fingerprint
    assert prints[0] != prints[1] and prints[0] != prints[2] and prints[0] == prints[3] and prints[0] != prints[4]


def test_negation_is_exact_in_every_mode_and_the_ledger_alternates_copies_and_signs():
    cpu = backends.create("cpu")
    for mode in ("fp32", "bf16"):
        a, = cpu.inputs([(16, 8)], 3, mode)
        before = a.copy()
        negate(np, a)
        assert np.array_equal(backends.widened(np, a), -backends.widened(np, before))
    operands = cpu.inputs([(8, 4), (4, 6)], 1)
    product = np.matmul(*operands)
    out, buffer = cpu.poisoned_output((8, 6))
    ledger = Ledger(cpu, operands, out, buffer, seed=1)
    seen = []
    for _ in range(4):
        ledger.before()
        assert np.isnan(ledger.out).all()  # poisoned before every launch
        seen.append((ledger.operands[0].ctypes.data, ledger.current.sign))
        np.matmul(*ledger.operands, out=ledger.out)
        ledger.after()
    assert seen[0][0] == seen[2][0] != seen[1][0] == seen[3][0]  # two copies at two addresses, in turn
    assert [sign for _, sign in seen] == [1, 1, -1, -1]  # a copy used again is negated
    assert ledger.differing() == (0, "")
    assert all(np.array_equal(held, product) for _, held in ledger.held_outputs())  # signs undone


def test_every_reported_time_is_gated_and_a_device_without_a_peak_is_unchecked():
    device = {"device": "cpu", "peak_tflops": {"fp32": 1.0}}
    flops = 2.0 * 1000**3
    honest = {"median_s": 0.01, "min_s": 0.009}
    assert checking.gate(flops, 0, honest, device, "fp32", "hot") == (None, "checked")
    for name in ("min_s", "batched_median_s"):
        refused, _ = checking.gate(flops, 0, {**honest, name: 1e-5}, device, "fp32", "hot")
        assert refused and "above the device's fp32 peak" in refused
    refused, gate = checking.gate(flops, 0, honest, {"device": "cuda", "gpu": "Future GPU", "peak_tflops": {}},
                                  "fp32", "hot")
    assert refused is None and gate.startswith("unchecked: no known fp32 peak for Future GPU")


def test_the_cpu_has_a_peak_and_gpus_after_hopper_have_rates():
    peak, basis = backends.cpu_peak()
    assert peak["fp32"] > 0 and "logical cores" in basis
    for cc in ("10.0", "12.0"):
        assert backends.FLOP_PER_CLOCK_PER_SM[cc]["fp32"] > 0


def test_the_cli_times_the_shape_it_names_within_the_cpus_peak(capsys, monkeypatch):
    """The README's example shape: timed as 1000x999x1001, not as a 1x1x1 sweep point with that shape's FLOPs."""
    code = cli.main(["--config", str(config.ROOT / "config" / "cpu.yaml"), "run", "cpu/numpy-blas",
                     "--shape", "1000x999x1001"])
    out = capsys.readouterr().out
    assert code == 0, out
    tflops = float(re.search(r"\(([\d.]+) TFLOP/s\)", out).group(1))
    assert 0 < tflops <= backends.cpu_peak()[0]["fp32"], out
    assert "timing gate: checked" in out
