import pytest
from conftest import ROOT, snakemake

from gemmbench import configuration
from gemmbench.configuration import ConfigError
from gemmbench.present import views


@pytest.mark.parametrize("name", ["config.yaml", "cpu.yaml", "test.yaml"])
def test_shipped_configs_are_valid(name):
    cfg = configuration.load(ROOT / "config" / name)
    assert cfg["square_sizes"] and cfg["modes"]


def test_defaults_are_filled_in():
    cfg = configuration.validate({})
    assert cfg["square_sizes"] == [256, 512, 1024, 2048, 4096, 8192, 16384]
    assert cfg["modes"] == ["fp32", "tf32"]
    assert cfg["device"] == "auto"
    assert cfg["timing"]["min_samples"] == 10
    assert "tolerance" not in cfg  # each mode's bound follows from its arithmetic (measure/checking.py)


def test_the_removed_tolerance_key_is_named_in_one_line():
    with pytest.raises(configuration.ConfigError, match="tolerance is no longer read") as raised:
        configuration.validate({"tolerance": {"fp32": 1e-4}})
    assert "\n" not in str(raised.value)


def test_default_experiment_matches_the_brief():
    cfg = configuration.load(ROOT / "config" / "config.yaml")
    assert cfg["square_sizes"] == [256, 512, 1024, 2048, 4096, 8192, 16384]
    shapes = cfg["validation_shapes"]
    assert any(m != n != k != m for m, n, k in shapes), "a rectangular M≠N≠K shape"
    assert any(max(s) <= 8 for s in shapes), "a tiny shape"
    assert any(all(x % 16 for x in s) for s in shapes), "a shape that no tile divides"


def test_the_cpu_default_runs_every_planned_point():
    """What ./run.sh runs without a GPU: nothing planned is skipped, and no figure needs cuBLAS."""
    from gemmbench import plan

    cfg = configuration.load(ROOT / "config" / "cpu.yaml")
    variants = plan.variants(cfg, "cpu")
    assert {v.family for v in variants} == {"cpu"}
    for variant in variants:
        for shape in plan.validation_shapes(cfg, variant.workload):
            assert plan.skip_reason(cfg, variant, shape) is None, (variant.key, shape)
    assert views.figures(cfg["workloads"], variants) == ["tflops_vs_size", "roofline", "validation_error",
                                                         "b2b_roofline", "b2b_validation_error"]


def test_a_config_file_that_cannot_be_one_is_named_in_one_line(tmp_path):
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "binary.yaml").write_bytes(bytes(range(256)))
    for name, says in [("missing.yaml", "no such file"), ("list.yaml", "expected a mapping"),
                       ("binary.yaml", "cannot be read as text")]:
        with pytest.raises(ConfigError, match=says) as caught:
            configuration.read(tmp_path / name)
        assert "\n" not in str(caught.value) and name in str(caught.value)


@pytest.mark.parametrize("bad, named", [
    ({"sizez": [256]}, "'sizez' was unexpected"),
    ({"square_sizes": [256, -5]}, "square_sizes[1]"),
    ({"modes": ["fp16"]}, "modes[0]"),
    ({"device": "gpu"}, "device"),
    ({"timing": {"budget_s": 0}}, "timing.budget_s"),
    ({"timing": {"min_samples": 50, "max_samples": 10}}, "min_samples"),
    ({"validation_shapes": [[1, 2]]}, "validation_shapes[0]"),
])
def test_bad_config_names_the_key(bad, named):
    with pytest.raises(ConfigError) as err:
        configuration.validate(bad)
    assert named in str(err.value)


def test_unknown_variant_and_params_are_named(cpu_config):
    from gemmbench import plan
    with pytest.raises(ConfigError, match="cpu/nope"):
        plan.variants(configuration.validate({**cpu_config, "variants": ["cpu/nope"]}), "cpu")
    cfg = configuration.validate({**cpu_config, "params": {"cpu/numba-tiled": {"tile_q": 3}}})
    variant = {v.key: v for v in plan.variants(cfg, "cpu")}["cpu/numba-tiled"]
    with pytest.raises(ConfigError, match="tile_q"):
        plan.params(cfg, variant)


def test_bad_config_fails_before_any_job(tmp_path, cpu_config):
    result = snakemake(tmp_path, "--cores", "1", config={**cpu_config, "square_sizes": [64, "big"]})
    assert result.returncode != 0
    assert "sizes[1]" in result.stderr + result.stdout
    assert not (tmp_path / "results").exists(), "no job may run on a bad config"


def test_device_cuda_without_gpu_is_an_error():
    from gemmbench import plan
    with pytest.raises(ConfigError, match="no GPU"):
        plan.require_gpu(gpus=0)
    plan.require_gpu(gpus=1)
    assert plan.resolve_device("cuda") == ("cuda", "")  # planning alone (dry run, submit host) needs no GPU
    assert plan.resolve_device("auto", gpus=0)[0] == "cpu"
    assert "no GPU" in plan.resolve_device("auto", gpus=0)[1]
    assert plan.resolve_device("auto", gpus=2) == ("cuda", "")


def test_running_device_cuda_without_a_gpu_fails_before_any_job(tmp_path, cpu_config):
    from gemmbench.plan import gpu_count
    if gpu_count():
        pytest.skip("this host has a GPU")
    result = snakemake(tmp_path, "--cores", "1", config={**cpu_config, "device": "cuda"})
    assert result.returncode != 0
    assert "device: cuda, but no GPU is visible" in result.stdout + result.stderr
    assert not (tmp_path / "results").exists()


def test_command_line_strings_are_read_as_the_schema_types():
    """`snakemake --config square_sizes='[1024]' tune='{enabled: false}'` hands every value over as a string."""
    cfg = configuration.validate({"square_sizes": ["1024", "4096"],
                                  "tune": {"enabled": "false", "size_classes": ["512"]},
                           "timing": {"budget_s": "2.5"}, "max_size": {"cpu": "512"}, "families": ["cpu"]})
    assert cfg["square_sizes"] == [1024, 4096] and cfg["tune"]["enabled"] is False
    assert cfg["tune"]["size_classes"] == [512]
    assert cfg["timing"]["budget_s"] == 2.5 and cfg["max_size"] == {"cpu": 512}
    # a variant's parameters too (they reached its build as strings: "can only concatenate str (not int) to str")
    cfg = configuration.validate({"params": {"cupy/tc07_registers": {"BM": "256", "GROUP": "8", "name": "x"}}})
    assert cfg["params"] == {"cupy/tc07_registers": {"BM": 256, "GROUP": 8, "name": "x"}}
    with pytest.raises(configuration.ConfigError, match=r"sizes\[0\]: 'big' is not of type 'integer'"):
        configuration.validate({"square_sizes": ["big"]})


@pytest.mark.parametrize("args, says", [
    (["--shape", "abc"], "--shape: 'abc' is not a shape"),
    (["--shape", "0x5x5"], "--shape: '0x5x5' is not a shape"),
    (["--shape", "-1x2x3"], "--shape: '-1x2x3' is not a shape"),
    (["--shape", "5x5"], "--shape: shape '5x5': a gemm shape has 3 sizes"),
    (["--size", "0"], "--size: '0' is not a positive whole number"),
    (["--mode", "bf16"], "--mode bf16: cpu/numpy-blas runs in fp32"),  # its kernel would read bfloat16 bits as floats
])
def test_a_bad_shape_on_the_command_line_is_one_line_naming_the_flag_and_value(args, says, capsys):
    from gemmbench.__main__ import main

    try:
        code = main(["run", "cpu/numpy-blas", *args])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and says in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("variant, args, label", [
    ("cpu/numpy-blas", ["--size", "64"], "64x64x64"),
    ("cpu/numpy-blas", ["--shape", "33x65x17"], "33x65x17"),  # not square: validated as awkward, then timed
    ("cpu/b2b_unfused_numpy-blas", ["--shape", "96x64x128x64"], "96x64x128x64"),
])
def test_the_cli_runs_one_shape_of_the_variants_workload(variant, args, label, capsys):
    """The workload turns the one shape into its plan (gemm: the sweep or an awkward shape; b2b: its axes)."""
    from gemmbench.__main__ import main

    assert main(["--config", str(ROOT / "config" / "cpu.yaml"), "run", variant, *args]) == 0
    out = capsys.readouterr().out
    assert f"{variant} fp32 {label}: ok" in out, out


def test_the_renamed_sizes_keys_are_still_read_each_said_once(caplog):
    """The four keys once all named `sizes` say which sizes they hold; a config that uses an old name still runs,
    with one line naming the new one, and its value wins over the default's new key (a file over config.yaml)."""
    old = {"sizes": [64], "tune": {"sizes": [32], "autotuner": {"sizes": [16]}}, "profile": {"sizes": [8]}}
    with caplog.at_level("WARNING", logger="gemmbench"):
        configuration._said.clear()
        cfg = configuration.validate({**old, "square_sizes": [256]})
        configuration.validate(old)
    assert (cfg["square_sizes"], cfg["tune"]["size_classes"], cfg["tune"]["autotuner"]["size_classes"],
            cfg["profile"]["profiled_sizes"]) == ([64], [32], [16], [8])
    said = [r.getMessage() for r in caplog.records]
    assert sorted(said) == sorted(f"config: {old} is now {new} (the old name is still read)" for old, new in (
        ("sizes", "square_sizes"), ("tune.sizes", "tune.size_classes"),
        ("tune.autotuner.sizes", "tune.autotuner.size_classes"), ("profile.sizes", "profile.profiled_sizes")))


@pytest.mark.parametrize("args, says", [
    (["{file}"], "(top level): Additional properties are not allowed ('unknown_key' was unexpected)"),
    (["--config", "modes=[fp33]"], "modes[0]: 'fp33' is not one of ['fp32', 'tf32', 'bf16']"),
    (["--config", "timing={budget_s: soon}"], "timing.budget_s: 'soon' is not of type 'number'"),
    (["--config", "modes"], "--config 'modes': expected KEY=VALUE"),
    (["--config", "families=[nosuchfamily]"], "families: ['nosuchfamily'] registered no variant; registered families "
                                              "are ['cpu', 'cublas', 'cupy', 'numba', 'tvm'] (a module of your own "
                                              "registers more: variant_modules)"),
])
def test_check_config_applies_the_whole_schema_in_one_line(args, says, tmp_path):
    """What ./run.sh asks before anything else is said: the config a run would get (the default, each file over it,
    each --config item over those) against the whole schema, wrong in exactly one line on stderr."""
    import subprocess
    import sys

    bad = tmp_path / "bad.yaml"
    bad.write_text("unknown_key: 1\n")
    args = [arg.replace("{file}", str(bad)) for arg in args]
    done = subprocess.run([sys.executable, "-m", "gemmbench", "check-config", *args], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [f"error: invalid gemmbench config: {says}"] or \
        done.stderr.splitlines() == [f"error: {says}"]


def test_check_config_passes_what_a_run_accepts():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "gemmbench", "check-config", "config/cpu.yaml", "--config",
                           "square_sizes=[64,128]", "tune={enabled: false}"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
