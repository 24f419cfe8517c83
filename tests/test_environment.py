"""environment.yml and requirements.txt must pin the same packages, and the pins we know matter."""
import re

import yaml
from conftest import ROOT


def requirement_pins(path):
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return {line for line in lines if line and not line.startswith("-r")}


def test_environment_yml_and_requirements_agree():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert set(pip_section) == requirement_pins(ROOT / "requirements.txt")


def test_the_lock_holds_every_requirement_at_its_pin_and_the_cuda_wheels():
    """requirements.lock is the resolved environment: each direct pin at its version, and the CUDA wheels that
    numba-cuda[cu13] brings (NVRTC, NVVM: the compilers the tuning records are keyed on) at theirs."""
    def pins(path):
        return dict(re.match(r"([A-Za-z0-9_.-]+)(?:\[.*\])?==(.+)", p).groups() for p in requirement_pins(path))

    def norm(name):
        return name.lower().replace("_", "-")

    locked = {norm(k): v for k, v in pins(ROOT / "requirements.lock").items()}
    assert all(locked.get(norm(k)) == v for k, v in pins(ROOT / "requirements.txt").items())
    assert {"nvidia-cuda-nvrtc", "nvidia-nvvm", "cuda-bindings", "nvidia-cuda-runtime"} <= set(locked)


def test_known_pins():
    pins = dict(re.match(r"([A-Za-z0-9_.-]+)(?:\[.*\])?==(.+)", p).groups()
                for p in requirement_pins(ROOT / "requirements.txt"))
    assert tuple(int(x) for x in pins["numpy"].split(".")[:2]) < (2, 5)  # numba-cuda 0.30.4 breaks on 2.5
    assert pins["apache-tvm"] == "0.27.0.post1"
    assert pins["apache-tvm-ffi"] == "0.1.14.post1"  # 0.1.15 segfaults in MetaSchedule
    assert all("==" in p for p in requirement_pins(ROOT / "requirements.txt")), "every requirement is pinned"


def test_a_worker_starts_without_the_plotting_stack():
    """Every point's worker imports the harness and the variants: plotting and table libraries there (seconds to
    import on a loaded machine) would count against each point's watchdog."""
    import subprocess
    import sys

    code = ("import sys, gemmbench.run.worker; from kernels import registry; registry.load(); "
            "print(sorted(m for m in ('seaborn', 'matplotlib', 'pandas') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
