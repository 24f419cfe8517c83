"""GPU-only checks (marked `gpu`; skipped without a CUDA device)."""
import pytest

from gemmbench import configuration
from gemmbench.measure import devices
from gemmbench.measure.cuda_device import CudaBackend
from gemmbench.stages import build, common, measure, profile, tune
from kernels import registry
from tests.timings import TIMINGS

pytestmark = pytest.mark.gpu


def reference(a, b):
    """The fp64 product the harness checks a gemm against."""
    return a.astype("float64") @ b.astype("float64")


@pytest.fixture(scope="module")
def cuda():
    return CudaBackend()


@pytest.mark.parametrize("mode", registry.MODES)
def test_cublas_validates_on_awkward_and_sweep_shapes(tmp_path, mode):
    cfg = configuration.validate({"device": "cuda", "families": ["cublas"], "modes": [mode],
                                  "square_sizes": [256, 1024],
                           "validation_shapes": [[1, 1, 1], [7, 13, 5], [1000, 999, 1001], [4096, 96, 8192]]})
    built = build.run(cfg, "cublas/gemm", mode, tmp_path / "build.json")
    assert built["status"] == "ok" and built["cublas_version"] > 0
    rows = measure.run(cfg, "cublas/gemm", mode, tmp_path / "build.json", tmp_path / "validate.json")[0]
    assert [r["status"] for r in rows] == ["ok"] * 6, [r["message"] for r in rows]
    assert all(r["gpu_uuid"].startswith("GPU-") for r in rows)


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (33, 63, 7), (1000, 64, 999), (513, 4096, 257)])
def test_a_scale_from_the_tensor_cores_is_the_fp64_scale_to_a_part_in_a_thousand(cuda, m, k, n):
    """Validation's inputs (rows and columns scaled over 2^±12): the scale the GPU's checks use (its squares
    multiplied on the TF32 tensor cores, short reductions in fp64) against the scale in fp64, element by element."""
    from gemmbench import workloads

    a, b = (devices.widened(cuda.xp, x) for x in cuda.inputs([(m, k), (k, n)], 7, "fp32", scaled=True))
    gemm = workloads.get("gemm")
    fast, exact = gemm.scale(cuda.xp, [a, b], cuda.nonnegative_product), gemm.scale(cuda.xp, [a, b], cuda.xp.matmul)
    assert fast.dtype == (cuda.xp.float64 if k < cuda.SHORT_REDUCTION else cuda.xp.float32)
    assert float(cuda.xp.min(exact)) > 0 and float(cuda.xp.max(cuda.xp.abs(fast - exact) / exact)) < 1e-3


def test_tf32_is_really_tensor_core_tf32(cuda):
    """TF32 rounds inputs to 10 mantissa bits: its error must be clearly larger than FP32's."""
    from kernels import registry
    variant = registry.load()["cublas/gemm"]
    a, b = cuda.inputs([(512, 2048), (2048, 512)], seed=1)
    errors = {}
    for mode in ("fp32", "tf32"):
        c, _ = cuda.poisoned_output((512, 512))
        variant.run(variant.build(mode, {}, None).artifact, a, b, c, cuda.stream)
        cuda.synchronize()
        errors[mode] = cuda.errors(reference(a, b), c)["rel_error"]
    assert errors["tf32"] > 20 * errors["fp32"], errors


def test_device_facts_have_peak_bandwidth_and_versions(cuda):
    facts = cuda.facts()
    assert facts["sm_count"] > 0 and facts["max_sm_clock_mhz"] > 0
    assert facts["copy_bandwidth_gbps"] > 100
    if facts["compute_capability"] in devices.FLOP_PER_CLOCK_PER_SM:
        assert facts["peak_tflops"].get("fp32", 0) > 0
    assert facts["versions"]["cublas"] > 0 and facts["driver"]
    telemetry = cuda.telemetry()
    assert telemetry["sm_clock_mhz"] > 0 and "slowdown" in telemetry


def test_a_run_that_waits_on_the_device_is_refused_not_mistimed(cuda, monkeypatch):
    monkeypatch.setattr(cuda, "BLOCK_TIMEOUT_NS", 200_000_000)
    from gemmbench.measure.cuda_device import BlockedTooLong

    with pytest.raises(BlockedTooLong):
        cuda.device_time(lambda: cuda.cupy.cuda.runtime.deviceSynchronize())
    x = cuda.xp.ones(10)
    x.sum()  # compile the reduction kernel now: the spinning kernel would time out on a JIT compile
    cuda.synchronize()
    assert cuda.device_time(lambda: x.sum()) > 0  # the stream works again afterwards


def test_cold_cache_flush_runs_outside_the_timed_region(cuda):
    a, b = cuda.inputs([(64, 64), (64, 64)], seed=2)
    a @ b  # warm up: first use may load modules or allocate a workspace, which waits on the device
    cuda.flush_cache()
    assert cuda.device_time(lambda: a @ b) > 0


@pytest.mark.parametrize("mode, shapes", [("fp32", [(65, 33), (33, 47)]), ("bf16", [(65, 33), (33, 47)]),
                                          ("fp32", [(40, 24), (24, 16), (16, 9)])])
def test_a_batchs_sets_hold_their_keys_content_and_each_launchs_test_sees_its_own_output(cuda, mode, shapes):
    """One launch per step refreshes every set of a batch: each set's inputs are what its keys make (the keys a drawn
    sample's inputs are made again from), its output poisoned, and Freivalds' test of each set sees its own output."""
    from gemmbench.measure import checking

    cupy, launches = cuda.cupy, 3
    outputs = [cuda.poisoned_output((shapes[0][0], shapes[-1][1])) for _ in range(launches)]
    sets = cuda.sets([cuda.inputs(shapes, seed, mode) for seed in range(launches)], [o for o, _ in outputs],
                     [b for _, b in outputs])
    sets.refresh(20261129)
    for j in range(launches):
        assert bool(cupy.isnan(sets.outs[j]).all())
        for x, key in zip(sets.operands[j], sets.keys(j)):
            again = x.copy()
            cuda.fill_random(again, key)
            assert bool((again == x).all())
        product = devices.widened(cupy, sets.operands[j][0])
        for x in sets.operands[j][1:]:
            product = product @ devices.widened(cupy, x)
        sets.outs[j][...] = product.astype(cupy.float32)
    assert not bool((sets.operands[0][0] == sets.operands[1][0]).all())
    sets.outs[1][:4, :4] = 0
    into = cupy.zeros((launches, 2), dtype=cupy.float64)
    sets.project(into)
    k = max(x.shape[0] for x in sets.operands[0][1:])
    verdicts = [checking.projection_verdict([tuple(r)], mode, k) for r in cupy.asnumpy(into)]
    assert verdicts[0] is None and verdicts[2] is None, verdicts
    assert "not the product of its inputs" in verdicts[1]


LADDERS = sorted(k for k, v in registry.load().items()
                 if v.family in ("cupy", "numba", "tvm") and v.workload == "gemm" and not v.tuner and "fp32" in v.modes)
B2B = sorted(k for k, v in registry.load().items() if v.workload == "b2b" and v.device == "cuda")


@pytest.mark.parametrize("key", LADDERS)
def test_every_ladder_rung_validates_with_its_tuned_parameters(tmp_path, key):
    """Aligned (float4) and unaligned shapes, tiles cut at every edge, with the H100 size classes' kernels."""

    from gemmbench.tuning import records
    variant = registry.load()[key]
    cfg = configuration.validate({"device": "cuda", "families": [variant.family], "variants": [key], "modes": ["fp32"],
                           "square_sizes": [256],
                           "validation_shapes": [[1, 1, 1], [7, 13, 5], [33, 65, 17], [1000, 999, 1001],
                                                 [4096, 96, 8192], [2048, 2048, 2048]]})
    tuned = records.committed_path("nvidia-h100-80gb-hbm3", variant, "fp32")
    built = build.run(cfg, key, "fp32", tmp_path / "build.json", tuned if tuned.exists() else None)
    assert built["status"] == "ok", built["message"]
    rows = measure.run(cfg, key, "fp32", tmp_path / "build.json", tmp_path / "validate.json")[0]
    declared = lambda r: r["status"] == "skipped" and variant.unsupported(r["m"], r["n"], r["k"], {})  # noqa: E731
    assert all(r["status"] == "ok" or declared(r) for r in rows), [(r["m"], r["n"], r["k"], r["message"]) for r in rows]
    assert any(r["status"] == "ok" for r in rows)


TENSOR_CORE = {key: v for key, v in registry.load().items()
               if v.workload == "gemm" and v.family != "cublas" and set(v.modes) & {"tf32", "bf16"}}
TENSOR_CORE_MODES = [(key, mode) for key in sorted(TENSOR_CORE) for mode in TENSOR_CORE[key].modes]


@pytest.mark.parametrize("key,mode", TENSOR_CORE_MODES)
def test_every_tensor_core_rung_validates_in_each_mode_with_a_sample_of_its_space(tmp_path, key, mode):
    """Tiles cut at every edge, K not a multiple of the k-tile (nor of 2: BF16 rows of odd length), tall-skinny,
    against the fp64 product."""

    from gemmbench.tuning import search
    variant = TENSOR_CORE[key]
    cfg = configuration.validate({"device": "cuda", "families": [variant.family], "variants": [key], "modes": [mode],
                           "square_sizes": [256],
                           "validation_shapes": [[1, 1, 1], [7, 13, 5], [33, 65, 17], [1000, 999, 1001],
                                                 [4096, 96, 8192], [2048, 2048, 2048],
                                                 # 16-byte rows with every tile cut short: zero-filled copies
                                                 [1000, 1000, 1000], [136, 264, 72]]})
    for params in search.candidates(variant, variant.params, 3, seed=1):
        cfg["params"] = {key: params}
        built = build.run(cfg, key, mode, tmp_path / "build.json")
        assert built["status"] == "ok", built["message"]
        rows = measure.run(cfg, key, mode, tmp_path / "build.json", tmp_path / "validate.json")[0]
        assert all(r["status"] == "ok" for r in rows), [(params, r["m"], r["n"], r["k"], r["message"]) for r in rows]


@pytest.mark.parametrize("key", B2B)
def test_every_b2b_variant_validates_on_awkward_shapes_in_each_mode(tmp_path, key):
    """Edges in every axis, widths below each compiled capacity, unaligned rows (4-byte copies), n0 = n1 = 256; for a
    rung declared for narrow shapes only (K0, N0, N1 ≤ 64), its own edges: the shapes beyond it are skipped as
    declared."""
    variant = registry.load()[key]
    narrow = variant.unsupported(4096, 1000, 256, 256, {}) is not None
    axes = ({"m": [4096], "k0": [64, 36, 37], "n0": [64, 33], "n1": [64, 30]} if narrow
            else {"m": [4096], "k0": [64, 1000], "n0": [256], "n1": [64, 256]})
    cfg = configuration.validate({"device": "cuda", "workloads": ["b2b"], "families": [variant.family],
                                  "variants": [key],
                           "b2b": axes})
    declared = lambda r: r["status"] == "skipped" and variant.unsupported(r["m"], r["k0"], r["n0"], r["n1"], {})  # noqa: E731
    for mode in variant.modes:
        built = build.run(cfg, key, mode, tmp_path / "build.json")
        assert built["status"] == "ok", built["message"]
        rows = measure.run(cfg, key, mode, tmp_path / "build.json", tmp_path / "validate.json")[0]
        assert len(rows) == (12 if narrow else 4) + 7
        assert all(r["status"] == "ok" or declared(r) for r in rows), [
            (r["m"], r["k0"], r["n0"], r["n1"], r["status"], r["message"]) for r in rows]
        # a narrow rung runs at least its edges of k0 = 64 and 36 (rung 5 reads A0's rows by TMA: k0 a multiple of 4)
        assert sum(r["status"] == "ok" for r in rows) >= (8 + 1 if narrow else 4 + 7)


def test_the_tune_stage_keeps_the_fastest_validated_candidate(tmp_path):
    cfg = configuration.validate({"device": "cuda", "tune": {"trials": 3, "size_classes": [128, 512]}})
    record = tune.run(cfg, "cupy/06_blocktile_2d", "fp32", "test-gpu", tmp_path / "tune.json")
    assert set(record["classes"]) == {"128", "512"} and len(record["trials"]) == 6
    for size, best in record["classes"].items():
        timed = [t for t in record["trials"] if t["size"] == int(size) and t["status"] == "ok"]
        assert best["median_s"] == min(t["median_s"] for t in timed)


def test_metaschedule_tunes_on_the_gpu_and_its_record_validates_at_other_shapes(tmp_path):
    """A short MetaSchedule tuning through the tune stage (its candidates compiled ahead in parallel, then
    validated and timed by the harness's supervised worker), then the build with its record, validated at shapes
    it was not tuned for."""
    key = "tvm/04_metaschedule"
    cfg = configuration.validate({"device": "cuda", "families": ["tvm"], "variants": [key], "modes": ["fp32"],
                           "square_sizes": [512],
                           "validation_shapes": [[33, 65, 17], [1000, 999, 1001]],
                           "tune": {"transfer": False, "autotuner": {"trials": 16, "size_classes": [256]}}})
    record = tune.run(cfg, key, "fp32", "test-gpu", tmp_path / "tune.json")
    found = record["classes"]["256"]
    assert found["trials"] == 16 and found["median_s"] > 0 and found["tune_s"] > 0
    # the contest: MetaSchedule's best records again beside the recipe's sets, in the same sitting; the fastest wins
    contest = found["contest"]
    assert found["sittings"][-1]["candidates"] == 16 + len(contest) and any(c["recipe"] for c in contest)
    assert found["median_s"] == min(c["median_s"] for c in contest if c["status"] == "ok")
    assert (tmp_path / "tune" / "256" / "database_tuning_record.json").exists()
    built = build.run(cfg, key, "fp32", tmp_path / "build.json", tmp_path / "tune.json")
    assert built["status"] == "ok", built["message"]
    rows = measure.run(cfg, key, "fp32", tmp_path / "build.json", tmp_path / "validate.json")[0]
    assert len(rows) == 3 and all(r["status"] == "ok" for r in rows), [(r["m"], r["message"]) for r in rows]


def test_the_cli_runs_a_tuned_variant_with_the_committed_tuning_as_the_pipeline_does(capsys):
    """On a GPU model with committed tuning (the H100 and H200 have it for the CuPy rungs), `run` builds the tuned
    per-class kernels; elsewhere it says it runs the defaults."""
    from gemmbench import plan
    from gemmbench.__main__ import main
    from gemmbench.tuning import records

    cfg = configuration.validate({"device": "cuda"})
    _, committed = records.committed(cfg["tune"], registry.load()["cupy/06_blocktile_2d"], "fp32", plan.gpu_model(cfg))
    code = main(["run", "cupy/06_blocktile_2d", "--size", "1024"])
    err = capsys.readouterr().err
    assert code == 0
    assert ("the tuned parameters of" if committed else "no current committed tuning") in err


def test_a_gpu_point_reports_its_clocks_over_the_sampling_window(tmp_path):
    cfg = configuration.validate({"device": "cuda", "families": ["cublas"], "modes": ["fp32"], "square_sizes": [2048],
                           "validation_shapes": []})
    build.run(cfg, "cublas/gemm", "fp32", tmp_path / "build.json")
    row = measure.run(cfg, "cublas/gemm", "fp32", tmp_path / "build.json", tmp_path / "validate.json",
                         tmp_path / "bench.json")[1][0]
    assert row["status"] == "ok", row["message"]
    assert row["clock_reads"] >= 2 and 0 < row["sm_clock_min_mhz"] <= row["sm_clock_mean_mhz"]
    assert 0 <= row["slowdown_share"] <= 1


NOT_THE_PRODUCT = "its output is not the product of its inputs"
UNFINISHED = "unwritten when the harness's stream had finished its work"
NOT_FP32 = "not fp32 arithmetic"


def _measure(tmp_path, variant, timing, sizes=(1024,), shapes=()):
    family = variant.split("/")[0]
    cfg = configuration.validate({"device": "cuda", "families": [family], "variants": [variant], "modes": ["fp32"],
                           "square_sizes": list(sizes), "validation_shapes": [list(s) for s in shapes],
                           "variant_modules": ["tests.planted_gpu"], "timing": TIMINGS[timing],
                           "cache_dir": str(tmp_path / "cache")})
    name = variant.replace("/", "-")
    build.run(cfg, variant, "fp32", tmp_path / f"{name}-build.json")
    return measure.run(cfg, variant, "fp32", tmp_path / f"{name}-build.json", tmp_path / f"{name}-validate.json",
                          tmp_path / f"{name}-bench.json")


@pytest.mark.parametrize("variant, stage, says, timing", [(*control, "config") for control in [
    ("cupy/planted-other-stream", "bench", "does not run on the harness's stream"),
    ("cupy/planted-dropped-term", "validate", "an element's error is"),
    ("cupy/planted-past-the-end", "validate", "1 elements written outside the output"),
    ("cupy/planted-tf32-inputs", "validate", NOT_FP32),
    ("cupy/planted-rare-race", "bench", NOT_THE_PRODUCT)]] + [
    (*control, timing) for timing in TIMINGS for control in [
    ("cupy/planted-skips-once-warm", "bench", NOT_THE_PRODUCT),
    ("cupy/planted-half-once-warm", "bench", NOT_THE_PRODUCT),
    ("cupy/planted-pointer-cache", "bench", NOT_THE_PRODUCT),
    ("cupy/planted-rare-swap", "bench", NOT_THE_PRODUCT),
    ("cupy/planted-unreset-counter", "validate", "launch 2 of 2"),
    ("cupy/planted-later-launch", "bench", NOT_THE_PRODUCT),
    ("cupy/planted-reference-writer", "validate", "fp64 reference was written while the variant ran"),
    ("cupy/planted-leaves-kernel", "validate", "the device was still busy"),
    # its work on another stream: the stream check sees it where that work is still running after the warm-up
    ("cupy/planted-side-after-event", "bench", (NOT_THE_PRODUCT, "does not run on the harness's stream"))]])
def test_every_planted_gpu_fault_is_caught_and_none_is_published(tmp_path, variant, stage, says, timing):
    """Under every timing the project ships (tune's included)."""
    checked, timed = (rows[0] for rows in _measure(tmp_path, variant, timing))
    assert timed["status"] != "ok"
    if stage == "validate":
        assert checked["status"] == "failed" and says in checked["message"], checked["message"]
    elif checked["status"] == "ok":  # validation may also see it (another stream's result can arrive late)
        # a kernel that skips work may already be skipping when the stream check looks (after the warm-up)
        caught = (says if isinstance(says, tuple) else (says,)) + (UNFINISHED,)
        assert timed["status"] == "failed" and any(words in timed["message"] for words in caught), timed["message"]


def test_an_fp32_product_of_bf16_pieces_fails_in_fp32_mode(tmp_path):
    checked = _measure(tmp_path, "cupy/planted-bf16-composed", "config", sizes=(256,), shapes=[(255, 257, 129)])[0]
    assert all(r["status"] == "failed" and NOT_FP32 in r["message"] for r in checked), checked


@pytest.mark.parametrize("control", ["cupy/planted-leaves-kernel", "cupy/planted-reference-writer",
                                     "cupy/planted-content-cache", "cupy/planted-later-launch"])
def test_the_variant_measured_after_a_gpu_control_is_ok_at_its_honest_time(tmp_path, control):
    """cuBLAS, a control, cuBLAS again, in one run's resident worker: the second cuBLAS is `ok` and as fast as the
    first (a kernel left spinning would share the GPU with it; its worker is replaced)."""
    first = _measure(tmp_path, "cublas/gemm", "config", sizes=(2048,))[1][0]
    _measure(tmp_path, control, "config", sizes=(2048,))
    again = _measure(tmp_path, "cublas/gemm", "config", sizes=(2048,))[1][0]
    assert first["status"] == again["status"] == "ok", again["message"]
    assert again["median_s"] <= 1.1 * first["median_s"], (first["median_s"], again["median_s"])


@pytest.mark.parametrize("timing", TIMINGS)
@pytest.mark.parametrize("cheat", ["cupy/planted-unobserved", "cupy/planted-content-cache"])
def test_a_cheat_that_cannot_hit_is_timed_with_its_work(tmp_path, timing, cheat):
    """planted-unobserved skips its work once its output holds a result, planted-content-cache replays a product kept
    by its inputs' content; the harness gives every timed launch fresh inputs and a poisoned output, so the time
    published is that of the work (not faster than cuBLAS's on the same shape)."""
    times = {}
    for variant in (cheat, "cublas/gemm"):
        cfg = configuration.validate({"device": "cuda", "families": ["cupy", "cublas"], "variants": [variant],
                               "modes": ["fp32"], "square_sizes": [1024], "validation_shapes": [],
                               "variant_modules": ["tests.planted_gpu"], "timing": TIMINGS[timing]})
        build.run(cfg, variant, "fp32", tmp_path / "build.json")
        row = measure.run(cfg, variant, "fp32", tmp_path / "build.json", tmp_path / "validate.json",
                             tmp_path / "bench.json")[1][0]
        assert row["status"] == "ok", row["message"]
        times[variant] = row
    for name in ("median_s", "min_s"):
        assert times[cheat][name] > times["cublas/gemm"][name]


def test_the_stream_check_leaves_the_harness_stream_current_and_times_what_runs_on_it():
    """Launches that name no stream go to the current one: after the check looks at an output from its side
    stream, that must still be the harness's, or the timing's events would bracket nothing."""
    import cupy

    backend = CudaBackend()
    a = cupy.ones((2048, 2048), dtype=cupy.float32)
    out = cupy.empty_like(a)
    run = lambda: cupy.matmul(a, a, out=out)  # noqa: E731
    run()  # warmed up as the bench warms up: the first matmul makes cuBLAS's handle, which waits on the device
    backend.synchronize()
    assert not backend.runs_outside_stream(run, out)
    assert cupy.cuda.get_current_stream() == backend.stream
    assert backend.device_time(run) > 2 * 2048**3 / 1e15  # not faster than a PFLOP/s: the work was timed


def test_tvm_build_facts_are_read_from_the_cubin_that_runs(tmp_path):
    """The loaded kernel and the SASS its facts count are one cubin (NVRTC's on this node)."""
    from kernels import registry

    variant = registry.load()["tvm/02_d2l_vectorized"]
    facts = variant.build("fp32", dict(variant.params), tmp_path).facts
    assert facts["sass_ffma"] > 0 and facts["sass_lds128"] > 0, facts  # its register caches are float4 by schedule


def test_the_profile_stage_counts_one_launch_of_the_bench_kernels_only(tmp_path):
    """Under the real ncu: the profiled launch is the rung's own kernel (none of the harness's: inputs, poisoning,
    references), with the registers its build reported; where ncu is missing this says so rather than pass."""
    import shutil

    if not shutil.which("ncu"):
        pytest.skip("Nsight Compute (ncu) not on PATH")
    cfg = configuration.validate({"device": "cuda", "families": ["cupy"], "modes": ["fp32"], "square_sizes": [1024],
                           "variants": ["cupy/05_blocktile_1d"], "tune": {"enabled": False},
                           "profile": {"profiled_sizes": [1024]}, "cache_dir": str(tmp_path / "cache")})
    key = "cupy/05_blocktile_1d"
    built = build.run(cfg, key, "fp32", tmp_path / "build.json")
    rows = profile.run(common.config_for(cfg, "profile", key, "fp32"), key, "fp32", tmp_path / "build.json",
                          tmp_path / "profile.json")
    assert [r["status"] for r in rows] == ["ok"], [r["message"] for r in rows]
    assert "sgemm" in rows[0]["kernel"] and rows[0]["registers"] == built["registers"]
    assert rows[0]["fma_pipe_instructions"] > 0 and rows[0]["duration_s"] > 0
