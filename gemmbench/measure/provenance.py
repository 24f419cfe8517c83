"""What made a number: the toolchain that compiled and ran the kernels (the GPU driver and the CUDA libraries
included), and the sources that asked for them.

The toolchain is a re-run trigger of every build (and, through the build record, of validation and bench): a new
driver, cuBLAS, NVRTC or compiler re-measures what it may change. Every row names the digest of the sources that ran
(the harness and the files that determine its variant), which holds in a copied or edited tree where git's commit
does not; the commit is recorded beside it. Neither keys anything.
"""
from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

# Python distributions that compile or run kernels, and the NVIDIA wheels of the CUDA libraries they load (absent
# ones are left out; a CUDA toolkit's own libraries are named by its version, cuda_toolkit).
DISTRIBUTIONS = ("numpy", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "apache-tvm", "apache-tvm-ffi",
                 "nvidia-cublas", "nvidia-cublas-cu12", "nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12", "nvidia-nvvm",
                 "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "cuda-bindings")


def _nvcc_version() -> str | None:
    """nvcc's release (ptxas ships with it), from CUDA_PATH or PATH; None without one."""
    nvcc = Path(os.environ["CUDA_PATH"], "bin", "nvcc") if os.environ.get("CUDA_PATH") else None
    nvcc = str(nvcc) if nvcc and nvcc.exists() else shutil.which("nvcc")
    if not nvcc:
        return None
    try:
        text = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"V(\d+\.\d+\.\d+)", text)
    return found.group(1) if found else None


def _nvvm_version(nvcc: str | None) -> str | None:
    """The NVVM that numba-cuda compiles with: the nvidia-nvvm wheel's where one is installed (cuda-pathfinder looks
    in site-packages first), else the CUDA toolkit's, which is nvcc's release."""
    try:
        return metadata.version("nvidia-nvvm")
    except metadata.PackageNotFoundError:
        return nvcc


def _nvrtc_version() -> str | None:
    """The NVRTC that CuPy compiles with (the CUDA toolkit's or a wheel's, whichever CuPy loads)."""
    try:
        from cupy.cuda import nvrtc
        return "%d.%d" % nvrtc.getVersion()
    except Exception:  # no CuPy, or no NVRTC library it can load
        return None


@functools.lru_cache(maxsize=None)
def toolchain() -> dict:
    """Versions of Python, the kernel libraries, NVRTC and nvcc on this host."""
    versions = {"python": platform.python_version()}
    for dist in DISTRIBUTIONS:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    nvcc = _nvcc_version()
    versions.update(nvrtc=_nvrtc_version(), nvcc=nvcc, nvvm=_nvvm_version(nvcc), cuda_toolkit=_toolkit_version(),
                    driver=_driver_version())
    return {name: version for name, version in versions.items() if version}


def _toolkit_version() -> str | None:
    """The CUDA toolkit at CUDA_PATH (its libraries, cuBLAS among them, serve CuPy where no wheel does)."""
    try:
        import json
        return json.loads(Path(os.environ.get("CUDA_PATH", "/usr/local/cuda"), "version.json").read_text())["cuda"][
            "version"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _driver_version() -> str | None:
    """The GPU driver's version from NVML (no CUDA context is made); None without one."""
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            return pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML library or no driver
        return None


HARNESS = ("gemmbench/**/*.py", "gemmbench/**/*.cu", "kernels/registry.py")


@functools.lru_cache(maxsize=None)
def sources_digest(root: str, files: tuple[str, ...] = ()) -> str:
    """A digest of the harness's sources under `root` and of `files` (a variant's determining files): what ran."""
    import hashlib

    paths = sorted({*(p.resolve() for pattern in HARNESS for p in Path(root).glob(pattern)),
                    *(Path(f).resolve() for f in files)})
    h = hashlib.sha256()
    for path in paths:
        h.update(path.relative_to(root).as_posix().encode() if path.is_relative_to(root) else path.name.encode())
        h.update(b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def source(root: str) -> dict:
    """The git commit of the tree at `root` and whether it differs from that commit (None outside git)."""
    def git(*args):
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=60)
    try:
        head, status = git("rev-parse", "HEAD"), git("status", "--porcelain")
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}
    if head.returncode or status.returncode:
        return {"git_commit": None, "git_dirty": None}
    return {"git_commit": head.stdout.strip(), "git_dirty": bool(status.stdout.strip())}
