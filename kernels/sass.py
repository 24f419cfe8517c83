"""What a compiled kernel holds, read from its SASS (the CUDA toolkit's cuobjdump): facts that registers alone do
not tell, such as whether shared memory is read 128 bits at a time. Without cuobjdump there are no such facts."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path


def cuobjdump() -> str | None:
    return shutil.which("cuobjdump") or next(
        (str(p) for p in [Path(os.environ.get("CUDA_PATH", "/usr/local/cuda")) / "bin" / "cuobjdump"] if p.exists()),
        None)


def sass_of(cubin: bytes) -> str:
    tool = cuobjdump()
    if not tool:
        return ""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        done = subprocess.run([tool, "-sass", file.name], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else ""


def memory_instructions(sass: str) -> dict:
    """Counts of the kernel's FFMAs and shared and global loads by width (static counts, whole kernel)."""
    ops = Counter(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass, re.M))
    if not ops:
        return {}
    width = lambda prefix, suffix: sum(n for op, n in ops.items()  # noqa: E731
                                       if op.split(".")[0] == prefix and op.endswith(suffix))
    return {"sass_ffma": ops["FFMA"], "sass_lds32": ops["LDS"] + ops["LDS.U"], "sass_lds64": width("LDS", ".64"),
            "sass_lds128": width("LDS", ".128"), "sass_ldg128": width("LDG", ".128")}
