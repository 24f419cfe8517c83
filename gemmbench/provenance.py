"""What made a number: the toolchain that compiled and ran the kernels, and the source tree that asked for them.

The toolchain is a re-run trigger of every build (and, through the build record, of validation and bench); the
source tree's commit is recorded in every row but keys nothing (a commit that changes no kernel re-measures nothing).
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

# Python distributions that compile or run kernels (absent ones are left out).
DISTRIBUTIONS = ("numpy", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "apache-tvm", "apache-tvm-ffi")


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
    versions.update(nvrtc=_nvrtc_version(), nvcc=_nvcc_version())
    return {name: version for name, version in versions.items() if version}


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
