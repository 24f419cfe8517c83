"""What a compiler makes of a kernel, as a digest: the proof that an edit left a tuned kernel's code alone.

NVRTC needs no GPU: it runs wherever the CUDA wheels are installed (CI included). A family's `Variant.generated`
returns such digests for a parameter set; the tune stage stores them for each size class's winner, and
`python -m gemmbench tuning-migrate` re-keys a record whose winners' code comes out the same under the edited sources.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

DETERMINES_KERNELS = False  # reads what compiles; not part of a kernel's canonical source
ARCH = "-arch=compute_90"  # the target every digest is taken for (what the kernels are tuned on)


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


def ptx(source: Path, expressions: list[str], options: tuple[str, ...]) -> str:
    """NVRTC's PTX for the template instantiations `expressions` of `source` (its own folder on the include path)."""
    from cuda.bindings import nvrtc

    result = nvrtc.nvrtcCreateProgram(source.read_bytes(), source.name.encode(), 0, [], [])
    _check(result)
    program = result[1]
    try:
        for expression in expressions:
            _check(nvrtc.nvrtcAddNameExpression(program, expression.encode()))
        flags = [f"-I{source.parent}".encode(), *(o.encode() for o in options)]
        _check(nvrtc.nvrtcCompileProgram(program, len(flags), flags), program)
        _, size = nvrtc.nvrtcGetPTXSize(program)
        text = b" " * size
        _check(nvrtc.nvrtcGetPTX(program, text))
        return text.rstrip(b"\0 ").decode()
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
