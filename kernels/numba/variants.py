"""The Numba CUDA ladder: one Python file per rung (01_naive.py … 08_cp_async.py), each a variant.

A rung file's `make(**params)` returns the kernel's Python function with its tile parameters as closure
constants: Numba compiles them in, so loops over tiles unroll and per-thread arrays become registers.
This module declares how each rung is launched and tuned, compiles it with numba.cuda.jit for float32
C-contiguous arrays, and reads off the PTX what Numba made of it (the build facts).
Rung 03 is a generalized ufunc (`product`), which Numba launches itself.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import math
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from kernels.registry import NUMBA, Built, Variant, register
from kernels.tiles import accumulators, block_threads, cdiv, divides, static_smem, warp_threads, warp_tiles

HERE = Path(__file__).parent
SIGNATURE = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"



def module(file: str):
    """A rung's module (file names start with their rung number, so they are imported by path name)."""
    return importlib.import_module(f"kernels.numba.{Path(file).stem}")


@dataclass(frozen=True)
class Rung:
    file: str
    defaults: Mapping[str, int] = field(default_factory=dict)
    space: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    block: Callable[[Mapping], tuple[int, ...]] = lambda p: (1,)  # threads per block, (x, y, z)
    tile: Callable[[Mapping], tuple[int, int]] = lambda p: (1, 1)  # (rows, cols) of C per block
    check: Callable[[Mapping], str | None] = lambda p: None  # why a parameter set cannot compile or run
    grid: str = "cols_rows"  # grid (x, y) over (cols, rows) of C; "rows_cols" for cuda.grid(2) as (row, col); "linear"
    name: str = ""  # default: the file's stem
    max_dim: int | None = None  # larger problems are declared unsupported (rung 03 runs in one thread)
    gufunc: bool = False
    builds_on: tuple[str, ...] = ()  # rung files this one imports its kernel from (in its key and its inputs)
    description: str = ""

    @property
    def variant_name(self) -> str:
        return self.name or Path(self.file).stem

    def threads(self, params: Mapping) -> int:
        return math.prod(self.block(params))

    def launch(self, params: Mapping, m: int, n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        rows, cols = self.tile(params)
        if self.grid == "linear":
            return (cdiv(m, rows) * cdiv(n, cols),), self.block(params)
        if self.grid == "rows_cols":
            return (cdiv(m, rows), cdiv(n, cols)), self.block(params)
        return (cdiv(n, cols), cdiv(m, rows)), self.block(params)

    def problems(self, params: Mapping) -> str | None:
        return (None if self.gufunc else block_threads(self.threads(params))) or self.check(params)


def _blocktile_check(p) -> str | None:
    return (divides(p, ("TM", "BM"), ("TN", "BN"))
            or static_smem(p["BK"] * (p["BM"] + 4 + p["BN"]))
            or accumulators(p["TM"] * p["TN"]))


def _warptile_block(p) -> tuple[int, int, int]:
    """(thread columns, thread rows) of a warp's sub-tile, then one z per warp."""
    cols = p["WN"] // p["WNITER"] // p["TN"]
    return cols, 32 // cols, warp_threads(p) // 32


def _warptile_shape_check(p) -> str | None:
    bad = warp_tiles(p)
    if bad:
        return bad
    threads = warp_threads(p)
    if threads % p["BK"] or threads % p["BN"] or (p["BM"] * p["BK"]) % threads or (p["BK"] * p["BN"]) % threads:
        return f"{threads} threads cannot load a {p['BM']}x{p['BK']} and a {p['BK']}x{p['BN']} tile in equal whole rows"
    if p["BK"] % 2:
        return "BK must be even (the k loop is unrolled by two)"
    if p["TM"] % 4 or p["TN"] % 4:
        return "TM and TN must be multiples of 4 (16-byte shared loads)"
    return None


def _buffered_check(p, buffers: int) -> str | None:
    """`buffers` shared buffers of each operand, rows padded by 4 floats, in static shared memory (at most 48 KiB in
    Numba)."""
    return _warptile_shape_check(p) or static_smem(buffers * p["BK"] * (p["BM"] + 4 + p["BN"] + 4))


def _warptile_check(p) -> str | None:
    return _buffered_check(p, 2)


def _cp_async_check(p) -> str | None:
    return _buffered_check(p, p["STAGES"])


WARPTILE_DEFAULTS = {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 32, "WMITER": 2, "WNITER": 2, "TM": 4, "TN": 4,
                     "GROUP": 8}
WARPTILE_SPACE = {"BM": (64, 128, 256), "BN": (64, 128, 256), "BK": (8, 16, 32), "WM": (32, 64, 128), "WN": (32, 64),
                  "WMITER": (1, 2), "WNITER": (1, 2), "TM": (4, 8), "TN": (4, 8), "GROUP": (4, 8, 16)}

RUNGS = (
    Rung("01_naive.py", block=lambda p: (32, 32), tile=lambda p: (32, 32), grid="rows_cols",
         description="cuda.grid(2), one thread per output, 32×32 threads; x runs down a column (uncoalesced)"),
    *(Rung("02_shared_tiles.py", {"TPB": tpb}, name=f"02_shared_tiles_tpb{tpb}",
           block=lambda p: (p["TPB"], p["TPB"]), tile=lambda p: (p["TPB"], p["TPB"]),
           description=f"cuda.shared.array tiles, TPB={tpb}, one output per thread") for tpb in (16, 32)),
    Rung("03_guvectorize.py", gufunc=True, max_dim=256,
         description="guvectorize(target='cuda'), (m,k),(k,n)->(m,n): the whole product in one thread"),
    Rung("04_blocktile_2d.py", {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},  # untuned: the plain baseline
         block=lambda p: (p["BN"] // p["TN"], p["BM"] // p["TM"]), tile=lambda p: (p["BM"], p["BN"]),
         check=_blocktile_check,
         description="TM×TN register tile per thread (cuda.local.array), A transposed and padded in shared memory"),
    Rung("05_warptile.py", WARPTILE_DEFAULTS, WARPTILE_SPACE,
         block=_warptile_block, tile=lambda p: (p["BM"], p["BN"]), check=_warptile_check, grid="linear",
         description="warp tiles, two shared buffers fed from registers, unsigned indices, grouped block order"),
    Rung("06_register_prefetch.py", WARPTILE_DEFAULTS, WARPTILE_SPACE, builds_on=("05_warptile.py",),
         block=_warptile_block, tile=lambda p: (p["BM"], p["BN"]), check=_warptile_check, grid="linear",
         description="rung 05 with fragments double-buffered in registers: the next k-step read during this "
                     "one's FMAs"),
    Rung("07_column_order.py", WARPTILE_DEFAULTS, WARPTILE_SPACE,
         builds_on=("05_warptile.py", "06_register_prefetch.py"),
         block=_warptile_block, tile=lambda p: (p["BM"], p["BN"]), check=_warptile_check, grid="linear",
         description="rung 06 with each k-step's FMAs column by column (one value of B meets the thread's values "
                     "of A in turn)"),
    Rung("08_cp_async.py", {**WARPTILE_DEFAULTS, "BK": 8, "STAGES": 3}, {**WARPTILE_SPACE, "STAGES": (2, 3, 4)},
         builds_on=("05_warptile.py", "06_register_prefetch.py", "async_copy.py"),
         block=_warptile_block, tile=lambda p: (p["BM"], p["BN"]), check=_cp_async_check, grid="linear",
         description="rung 07 fed by 4-byte cp.async (inline PTX through a Numba intrinsic), STAGES k-tiles deep, "
                     "A transposed by the copy, one barrier per k-tile"),
)


def ptx_facts(ptx: str) -> dict:
    """What NVVM made of the kernel, from its PTX: the instructions that separate Numba from CUDA C."""
    ops = Counter(re.findall(r"^\s*(?:@!?%p\d+\s+)?([a-z][\w.]*)", ptx, re.M))
    count = lambda pattern: sum(v for op, v in ops.items() if re.fullmatch(pattern, op))  # noqa: E731
    integer = count(r"(add|sub|mul|mad|shl|shr|and|or|xor|selp|setp\.\w+)\.[su]?(32|64|b32|b64)(\.\w+)?")
    wide = count(r"(add|sub|mul|mad|shl|shr|and|or|xor|selp|setp\.\w+)\.[su]?(64|b64)(\.\w+)?")
    return {
        "ptx_fma": count(r"fma\.rn(\.ftz)?\.f32"),
        "ptx_global_loads_vector": count(r"ld\.global(\.\w+)*\.v[24]\.f32"),
        "ptx_global_loads_scalar": count(r"ld\.global(\.nc)?\.f32"),
        "ptx_local_ops": count(r"(ld|st)\.local.*"),
        "ptx_cp_async": len(re.findall(r"cp\.async\.c[ag]\.shared\.global", ptx)),  # inside inline PTX blocks
        "ptx_int64_share": round(wide / integer, 2) if integer else 0.0,
    }


_SASS_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*)")


def sass_facts(sass: str) -> dict:
    """The hot loop of the SASS (the loop with the largest FFMA share): its size, FFMA share and shared loads."""
    ops, labels, pending = [], {}, []
    for line in sass.splitlines():
        label = re.match(r"\s*(\.L\w+):", line)
        if label:
            pending.append(label.group(1))
        found = _SASS_LINE.search(line)
        if found:
            address = int(found.group(1), 16)
            labels.update((name, address) for name in pending)
            pending = []
            ops.append((address, found.group(2), found.group(3)))
    loops = []
    for address, op, rest in ops:
        target = re.search(r"(\.L\w+)|0x([0-9a-f]+)", rest) if op.startswith("BRA") else None
        start = (labels.get(target.group(1)) if target.group(1) else int(target.group(2), 16)) if target else None
        if start is not None and start < address:
            body = Counter(o for a, o, _ in ops if start <= a <= address)
            loops.append((body["FFMA"] / sum(body.values()), body))
    share, body = max(loops, key=lambda loop: loop[0], default=(0, None))
    if not share:
        return {}
    return {"sass_hot_loop_instructions": sum(body.values()), "sass_hot_loop_ffma_share": round(share, 3),
            "sass_hot_loop_lds128": body["LDS.128"], "sass_hot_loop_lds32": body["LDS"],
            "sass_ldg128": sum(o.startswith("LDG") and ".128" in o for _, o, _ in ops)}


def limits(facts: dict) -> str:
    """The build facts in words: what holds this Numba kernel back against the CUDA C rungs."""
    notes = []
    if facts.get("ptx_global_loads_scalar") and not facts.get("ptx_global_loads_vector"):
        notes.append("scalar global loads (no float4 loads in Numba; argument alignment is unknown)")
    if facts.get("sass_hot_loop_lds32"):
        notes.append(f"{facts['sass_hot_loop_lds32']} scalar shared loads in the hot loop (index arithmetic "
                     "hides that they are neighbours)")
    if facts.get("ptx_local_ops"):
        notes.append(f"{facts['ptx_local_ops']} local-memory accesses (a per-thread array left in memory)")
    if facts.get("ptx_int64_share", 0) > 0.5:
        notes.append(f"{facts['ptx_int64_share']:.0%} of integer PTX is 64-bit (Numba indexes with int64)")
    if not facts.get("ptx_cp_async"):
        notes.append("shared memory fed through registers (no cp.async: Numba has none, see rung 08's intrinsic)")
    return "; ".join(notes)


def _sass(kernel) -> str:
    try:  # needs nvdisasm (CUDA toolkit); the PTX facts stand without it
        return kernel.inspect_sass()
    except Exception:
        return ""


@dataclass
class Compiled:
    rung: Rung
    params: dict
    kernel: object  # a numba.cuda dispatcher, or the gufunc
    streams: dict = field(default_factory=dict)  # CuPy stream pointer -> numba external stream


def _build(rung: Rung, params: Mapping) -> Built:
    from numba import guvectorize

    problem = rung.problems(params)
    if problem:
        raise ValueError(f"{rung.variant_name} cannot use {dict(params)}: {problem}")
    source = module(rung.file)
    if rung.gufunc:
        gufunc = guvectorize([source.SIGNATURE], source.LAYOUT, target="cuda")(source.product)
        return Built(Compiled(rung, dict(params), gufunc), {"threads": 1, "max_dim": rung.max_dim})
    dispatcher = _jit(source.make(**params), params)
    kernel = next(iter(dispatcher.overloads.values()))
    if rung.threads(params) > kernel.max_threads_per_block:  # registers × threads exceed the register file
        raise ValueError(f"{rung.variant_name} with {dict(params)} needs {kernel.regs_per_thread} registers per "
                         f"thread: at most {kernel.max_threads_per_block} threads per block, not "
                         f"{rung.threads(params)}")
    facts = {"registers": kernel.regs_per_thread, "local_bytes": kernel.local_mem_per_thread,
             "shared_bytes": kernel.shared_mem_per_block, "threads": rung.threads(params)}

    def code_facts() -> dict:  # NVVM compiles the PTX again and nvdisasm reads the cubin: a second or more
        read = {**ptx_facts(dispatcher.inspect_asm(next(iter(dispatcher.overloads)))), **sass_facts(_sass(kernel))}
        return {**read, "limits": limits({**facts, **read})}

    return Built(Compiled(rung, dict(params), dispatcher), facts, code_facts)


def code(rung: Rung, params: Mapping) -> dict:
    """What NVVM makes of the rung for `params` (its PTX for sm_90, symbols renamed: kernels/machine_code.py), and how
    it is launched: a tuning record's winners are migrated on it without a GPU."""
    from importlib import metadata

    from numba import cuda

    from kernels import machine_code

    kernel = module(rung.file).make(**params)
    ptx = machine_code.twice(lambda: machine_code.symbols_renamed(
        cuda.compile(kernel, SIGNATURE, device=False, abi="numba", cc=(9, 0), output="ptx")[0]), rung.variant_name)
    try:
        nvvm = metadata.version("nvidia-nvvm")
    except metadata.PackageNotFoundError:
        nvvm = "the toolkit's"
    return {"compiler": f"numba-cuda {metadata.version('numba-cuda')}, nvvm {nvvm}",
            "ptx": machine_code.digest([ptx.encode()]),
            "launch": {"shapes": [rung.launch(params, m, n) for m, n in machine_code.PROBE_SHAPES]}}


def _jit(kernel, params: Mapping):
    """Compiled now, for this GPU, through Numba's on-disk cache (NUMBA_CACHE_DIR): another process loads the
    kernel instead of compiling it again (seconds per rung). Numba keys it on the rung file, the closure's tile
    constants, the signature, the GPU's compute capability and its own version. A kernel it cannot cache is
    compiled as usual.

    Numba keeps one cache index per function name and rewrites it whole (read, add, write) with no lock, so processes
    that compile other parameter sets of one rung at once (the compile-ahead workers) drop each other's entries and
    can give two kernels one data file. Named per parameter set, each has an index of its own."""
    from numba import cuda

    kernel.__qualname__ = f"{kernel.__qualname__}_{cache_tag(params)}"
    try:
        return cuda.jit(SIGNATURE, cache=True)(kernel)
    except Exception as exc:  # noqa: BLE001 - a cache that fails costs only time
        print(f"numba: {kernel.__name__} not cached ({type(exc).__name__}: {exc}); compiling it", file=sys.stderr)
        return cuda.jit(SIGNATURE)(kernel)


def cache_tag(params: Mapping) -> str:
    """A short name of a parameter set (its digest), unique among those a rung is compiled with."""
    return hashlib.sha256(json.dumps(dict(params), sort_keys=True).encode()).hexdigest()[:12]


def _run(compiled: Compiled, a, b, c, stream) -> None:
    from numba import cuda

    numba_stream = compiled.streams.get(stream.ptr)
    if numba_stream is None:
        numba_stream = compiled.streams[stream.ptr] = cuda.external_stream(stream.ptr)
    # sync=False: Numba would otherwise wait on CuPy's stream, which the harness holds until launches are queued
    args = [cuda.as_cuda_array(x, sync=False) for x in (a, b, c)]
    if compiled.rung.gufunc:
        compiled.kernel(args[0], args[1], out=args[2], stream=numba_stream)
        return
    grid, block = compiled.rung.launch(compiled.params, a.shape[0], b.shape[1])
    compiled.kernel[grid, block, numba_stream](*args)


def _variant(rung: Rung) -> Variant:
    def unsupported(m, n, k, params) -> str | None:
        if rung.max_dim and max(m, n, k) > rung.max_dim:
            return f"the whole product runs in one GPU thread: declared up to {rung.max_dim} per dimension"
        return None

    return Variant(family="numba", name=rung.variant_name, device="cuda", modes=("fp32",),
                   build=lambda mode, params, cache_dir: _build(rung, params), run=_run,
                   params=dict(rung.defaults), space=dict(rung.space), check_params=rung.problems,
                   unsupported=unsupported, source_files=tuple(str(HERE / f) for f in (rung.file, *rung.builds_on)),
                   compilers=NUMBA, description=rung.description,
                   generated=None if rung.gufunc else (lambda mode, params: code(rung, params)))


for _rung in RUNGS:
    register(_variant(_rung))
