"""What a compiled kernel holds, read from its SASS (nvdisasm: see nvdisasms): facts that registers alone
do not tell, such as whether shared memory is read 128 bits at a time. Without nvdisasm there are no such facts."""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

# Reading what was compiled does not decide what is compiled: editing this module re-keys no tuning
# (gemmbench.tune.determining_files).
DETERMINES_KERNELS = False


def nvdisasms() -> list[str]:
    """Every nvdisasm at hand, in the order tried: the CUDA toolkit's at CUDA_PATH, the nvidia-cuda-nvdisasm wheel's
    of requirements.txt wherever Python imports from (PYTHONPATH too, which cuda.pathfinder does not search), the
    one Numba finds (cuda.pathfinder: site-packages, conda), the one on PATH. More than one, because a toolkit's
    nvdisasm can be older than the NVRTC that made the cubin, and a machine without a toolkit has the wheel's."""
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


class Unreadable(Exception):
    """No nvdisasm at hand reads this cubin; the message says what each one said."""


def sass_of(cubin: bytes) -> str:
    """The SASS of a cubin from the first nvdisasm that reads it (Unreadable where none does)."""
    if not cubin.startswith(b"\x7fELF"):
        raise Unreadable("not a cubin")
    cubin = whole_elf(cubin)
    tools = nvdisasms()
    if not tools:
        raise Unreadable("no nvdisasm (CUDA_PATH, the nvidia-cuda-nvdisasm wheel, PATH)")
    said = []
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        for tool in tools:
            done = subprocess.run([tool, "-c", file.name], capture_output=True, text=True)
            if done.returncode == 0:
                return done.stdout
            said.append(f"{tool}: {(done.stderr.strip() or f'exit {done.returncode}').splitlines()[-1]}")
    raise Unreadable("; ".join(said))


def whole_elf(cubin: bytes) -> bytes:
    """The cubin as long as its ELF header says it is. CuPy 14's nvrtc.getCUBIN drops a cubin's last byte (it strips
    a "trailing NULL" as from PTX text); the driver loads it anyway, but nvdisasm refuses it as an invalid ELF file.
    The byte is the top of the last program header's 8-byte alignment field, a zero."""
    if len(cubin) < 0x40:  # shorter than an ELF64 header
        return cubin
    program_headers, section_headers = struct.unpack_from("<QQ", cubin, 0x20)  # e_phoff, e_shoff
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", cubin, 0x36)
    end = max(program_headers + phentsize * phnum, section_headers + shentsize * shnum)
    return cubin + b"\0" * (end - len(cubin)) if len(cubin) < end else cubin


def facts(cubin: bytes) -> dict:
    """memory_instructions of a cubin's SASS, or why it could not be read (sass_unread)."""
    try:
        return memory_instructions(sass_of(cubin))
    except Unreadable as exc:
        return {"sass_unread": str(exc)}


INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def memory_instructions(sass: str) -> dict:
    """Counts of the kernel's FFMAs, tensor-core instructions (HMMA: mma.sync; HGMMA: wgmma), TMA copies (UTMALDG)
    and shared and global loads by width (static counts, whole kernel)."""
    ops = Counter(INSTRUCTION.findall(sass))
    if not ops:
        return {}

    def count(name: str, bits: str | None = None) -> int:  # e.g. LDS.128, LDG.E.128.CONSTANT; any HMMA.*
        return sum(n for op, n in ops.items()
                   if op.split(".")[0] == name and (bits is None or bits in op.split(".")[1:]))

    return {"sass_ffma": ops["FFMA"], "sass_hmma": count("HMMA"), "sass_hgmma": count("HGMMA"),
            "sass_tma": count("UTMALDG"),
            "sass_lds32": ops["LDS"] + ops["LDS.U"], "sass_lds64": count("LDS", "64"),
            "sass_lds128": count("LDS", "128"), "sass_ldg128": count("LDG", "128")}
