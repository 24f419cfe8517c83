"""What a compiler makes of a kernel, as a digest: the proof that an edit left a tuned kernel's code alone.

The digest is of the machine code NVRTC makes for the target (its cubin: SASS), not of its PTX, which NVRTC 13.5
does not make deterministically (register numbering and the order of moves differ from run to run), nor of its NVVM
IR, which keeps the names of inlined helpers. Renamed or moved helpers, comments and layout leave the cubin alone; a
change to what the kernel executes does not. NVRTC also records the working directory and the names files are
included by, so it compiles in "/" with the included files given by file name (`machine_code`): the digest is the same
in every clone and wherever a file sits.

NVRTC needs no GPU: it runs wherever the CUDA wheels are installed (CI included). A family's `Variant.generated`
returns such digests for a parameter set; the tune stage stores them for each size class's winner, and
`python -m gemmbench tuning-migrate` re-keys a record whose winners' code comes out the same under the edited sources.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

DETERMINES_KERNELS = False  # reads what compiles; not part of a kernel's canonical source
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
INCLUDE_BYTES = re.compile(rb'^(?:\s*#\s*include\s*)"([^"]+)"', re.MULTILINE)
ARCH = "-arch=sm_90"  # the target of every digest without an -arch of its own (what the kernels are tuned on)


@functools.cache
def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"nvrtc {major}.{minor}"


def _check(result, program=None) -> None:
    from cuda.bindings import nvrtc

    if result[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = ""
        if program is not None:
            _, size = nvrtc.nvrtcGetProgramLogSize(program)
            buffer = b" " * size
            nvrtc.nvrtcGetProgramLog(program, buffer)
            log = buffer.decode(errors="replace")
        raise RuntimeError(f"NVRTC: {result[0].name}\n{log[-2000:]}")


def _by_basename(text: bytes) -> bytes:
    return INCLUDE_BYTES.sub(lambda m: b'#include "' + m.group(1).rsplit(b"/", 1)[-1] + b'"', text)


def included(source: Path) -> list[Path]:
    """The files `source` includes with quotes (relative to the including file), transitively, each once."""
    found: dict[Path, None] = {}
    todo = [source]
    while todo:
        file = todo.pop(0)
        for name in INCLUDE.findall(file.read_text()):
            path = (file.parent / name).resolve()
            if path not in found:
                found[path] = None
                todo.append(path)
    return list(found)


def headers(source: Path) -> dict[str, bytes]:
    """The files `source` includes, by file name (`../common.cuh` as `common.cuh`), their own includes so renamed:
    the output records the names by which files are included, and a file's place in the tree is not its code."""
    paths = included(source)
    names = {path.name for path in paths}
    if len(names) < len(paths):
        raise ValueError(f"{source} includes two files of one name: {[str(p) for p in paths]}")
    return {path.name: _by_basename(path.read_bytes()) for path in paths}


PROBE_SHAPES = ((4096, 4096), (1000, 777))  # (m, n) of C whose launch geometry a code digest records: square, off-tile


def machine_code(source: Path, expressions: list[str], options: tuple[str, ...]) -> bytes:
    """NVRTC's cubin for the template instantiations `expressions` of `source`: the first that it makes twice. NVRTC
    13.5 now and then allocates registers otherwise in one compile (seen in a process's first compile of rung 7):
    the cubin it makes most is the one that stands for the code."""
    return twice(lambda: _cubin(source, expressions, options), f"{source.name} {expressions}")


def twice(compile_it, what: str):
    """The first output a compiler makes twice in three tries (NVRTC 13.5 now and then makes another)."""
    made = []
    for _ in range(3):
        code = compile_it()
        if code in made:
            return code
        made.append(code)
    raise RuntimeError(f"three compiles of {what} made three different outputs")


SYMBOL = re.compile(r"\b(?:_Z\w+|_cudapy_smem_\d+)")


def symbols_renamed(ptx: str) -> str:
    """PTX with its mangled symbols and shared arrays numbered by first appearance: Numba puts the module's path and a
    counter into every name (B2v1, B2v2 for two compiles of one function; _cudapy_smem_1, _5), which say nothing of
    the code."""
    names: dict[str, str] = {}
    return SYMBOL.sub(lambda m: names.setdefault(m.group(0), f"_S{len(names)}"), ptx)


def _cubin(source: Path, expressions: list[str], options: tuple[str, ...]) -> bytes:
    """One compile, its includes given to NVRTC by file name (`headers`), in "/": the same in every clone."""
    from cuda.bindings import nvrtc

    included = headers(source)
    result = nvrtc.nvrtcCreateProgram(_by_basename(source.read_bytes()), source.name.encode(), len(included),
                                      list(included.values()), [name.encode() for name in included])
    _check(result)
    program, cwd = result[1], os.getcwd()
    flags = [o.encode() for o in options]
    os.chdir("/")  # callers digest with no other thread running
    try:
        for expression in expressions:
            _check(nvrtc.nvrtcAddNameExpression(program, expression.encode()))
        _check(nvrtc.nvrtcCompileProgram(program, len(flags), flags), program)
        _, size = nvrtc.nvrtcGetCUBINSize(program)
        code = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(program, code))
        return code
    finally:
        os.chdir(cwd)
        nvrtc.nvrtcDestroyProgram(program)


def digest(parts: list[bytes]) -> str:
    return hashlib.sha256(b"".join(hashlib.sha256(part).digest() for part in parts)).hexdigest()[:16]
