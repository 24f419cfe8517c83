"""What a compiled kernel holds, read from its SASS (nvdisasm, found as Numba finds it): facts that registers alone
do not tell, such as whether shared memory is read 128 bits at a time. Without nvdisasm there are no such facts."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path


def nvdisasm() -> str | None:
    """nvdisasm from the CUDA toolkit at CUDA_PATH, else as Numba finds it (cuda.pathfinder: wheels, conda), else
    on PATH."""
    if os.environ.get("CUDA_PATH") and (Path(os.environ["CUDA_PATH"]) / "bin" / "nvdisasm").exists():
        return str(Path(os.environ["CUDA_PATH"]) / "bin" / "nvdisasm")
    try:
        from cuda import pathfinder
        found = pathfinder.find_nvidia_binary_utility("nvdisasm")
    except ImportError:
        found = None
    return found or shutil.which("nvdisasm")


def sass_of(cubin: bytes) -> str:
    """The SASS of a cubin, or "" where it cannot be read (no nvdisasm, or not a cubin)."""
    tool = nvdisasm()
    if not tool or not cubin.startswith(b"\x7fELF"):
        return ""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        done = subprocess.run([tool, "-c", file.name], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else ""


INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def memory_instructions(sass: str) -> dict:
    """Counts of the kernel's FFMAs and shared and global loads by width (static counts, whole kernel)."""
    ops = Counter(INSTRUCTION.findall(sass))
    if not ops:
        return {}

    def width(name: str, bits: str) -> int:  # e.g. LDS.128, LDG.E.128.CONSTANT
        return sum(n for op, n in ops.items() if op.split(".")[0] == name and bits in op.split(".")[1:])

    return {"sass_ffma": ops["FFMA"], "sass_lds32": ops["LDS"] + ops["LDS.U"], "sass_lds64": width("LDS", "64"),
            "sass_lds128": width("LDS", "128"), "sass_ldg128": width("LDG", "128")}
