"""What a compiled kernel holds, read from its SASS (nvdisasm: see nvdisasms): facts that registers alone
do not tell, such as whether shared memory is read 128 bits at a time. Without nvdisasm there are no such facts."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path


def nvdisasms() -> list[str]:
    """Every nvdisasm at hand, in the order tried: the CUDA toolkit's at CUDA_PATH, the nvidia-cuda-nvdisasm wheel's
    of requirements.txt wherever Python imports from (PYTHONPATH too, which cuda.pathfinder does not search), the
    one Numba finds (cuda.pathfinder: site-packages, conda), the one on PATH. More than one,
    because a toolkit's nvdisasm can be older than the NVRTC that made the cubin: the GPU nodes' 13.0.85 rejects
    NVRTC 13.0's sm_90 cubins as "an invalid ELF file", which the wheel's reads."""
    found = []
    if os.environ.get("CUDA_PATH"):
        found.append(Path(os.environ["CUDA_PATH"]) / "bin" / "nvdisasm")
    found.extend(wheel for entry in sys.path for wheel in sorted(Path(entry or ".").glob("nvidia/cu*/bin/nvdisasm")))
    try:
        from cuda import pathfinder
        found.append(pathfinder.find_nvidia_binary_utility("nvdisasm"))
    except ImportError:
        pass
    found.append(shutil.which("nvdisasm"))
    return list(dict.fromkeys(str(Path(f).resolve()) for f in found if f and Path(f).exists()))


def sass_of(cubin: bytes) -> str:
    """The SASS of a cubin from the first nvdisasm that reads it, or "" where none can (none at hand, or not a
    cubin)."""
    if not cubin.startswith(b"\x7fELF"):
        return ""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        for tool in nvdisasms():
            done = subprocess.run([tool, "-c", file.name], capture_output=True, text=True)
            if done.returncode == 0:
                return done.stdout
    return ""


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
