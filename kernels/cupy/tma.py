"""The tensor-core rungs fed by the Tensor Memory Accelerator (sm_90a): tc05_tma.cu (TMA copies, a producer warpgroup
and consumer warpgroups; BF16 and TF32), tc06_persistent.cu (the same kernel, its blocks persistent) and
tc07_registers.cu (TF32 with B's fragments through registers instead of a K-major copy of B).

Declared, compiled and checked as tensorcore.py's rungs are, but launched by this module: each operand's tensor map
(cuda.h's CUtensorMap) is encoded on the host by the driver (cuTensorMapEncodeTiled) and passed to the kernel by
value; tc06's and tc07's grids are one block per SM; in TF32 tc05 and tc06 first make the K-major Bᵀ that TF32 wgmma
needs, in a buffer kept from call to call (as cuBLAS keeps a workspace), and its time counts. Opt-in as the other
tensor-core rungs: a config adds `variant_modules: [kernels.cupy.tensorcore, kernels.cupy.tma]`.
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
from typing import Any

from kernels.cupy import ladder, tensorcore
from kernels.registry import register
from kernels.tiles import cdiv

# The kernels' parameters, for explicit instantiations (tests) of a signature that differs from the ladder's.
PARAMETERS = ("int, int, int, const __grid_constant__ TensorMap, const __grid_constant__ TensorMap, "
              "const {operand}*, const {operand}*, float*")
LINE_BYTES = 128  # a swizzled line of k: the inner extent of every TMA box (64 bfloat16, 32 floats)
TRANSPOSE_TILE = 32  # k_major_tf32's tiles, of 32 × 8 threads

# cuda.h's enumerators, for cuTensorMapEncodeTiled.
_DATA_TYPE = {2: 9, 4: 7}  # bytes of an element: CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, _FLOAT32
_NO_INTERLEAVE, _SWIZZLE_128B, _L2_PROMOTE_256B, _FILL_ZEROS = 0, 3, 3, 0


def _threads(p) -> int:
    return (p["BM"] // 64 + 1) * 128  # a producer warpgroup and a consumer warpgroup per 64 rows


def _smem(p) -> int:
    """STAGES buffers of BM lines of A and BN of B (128 bytes of k each), 1 KiB to align them to 1024 bytes, and a
    full and an empty barrier (8 bytes each) per stage."""
    return p["STAGES"] * ((p["BM"] + p["BN"]) * LINE_BYTES + 16) + 1024


def _check(p) -> str | None:
    """Registers (ptxas's counts over the space): a consumer's BN / 2 accumulators and about 30 for the rest."""
    if p["BM"] % 64 or p["BN"] % 128 or p["BM"] > 256:
        return "BM must be 64 to 256 rows of consumer warpgroups (a TMA box has 256 rows at most), BN whole 128s"
    if p["STAGES"] < 3:
        return "STAGES must be at least 3: a stage under the wgmma group in flight, one being read, one filling"
    return tensorcore._registers(_threads(p), p["BN"] // 2 + 30)  # (shared memory: Rung.problems)


_SPACE = {"BM": (64, 128, 256), "BN": (128, 256), "STAGES": (3, 4, 5, 6), "GROUP": (8, 16)}
_TMA = dict(template=("BM", "BN", "STAGES", "GROUP"), defaults={"BM": 128, "BN": 256, "STAGES": 4, "GROUP": 8},
            space=_SPACE, threads=_threads, tile=lambda p: (p["BM"], p["BN"]), check=_check, vec=True, grid_1d=True,
            dynamic_smem=_smem, options=(tensorcore.SM90A,))

REGISTERS_COLUMNS = 128  # tc07's columns of C per block: two consumer warpgroups of 64 (RS_COLUMNS)


def _registers_check(p) -> str | None:
    """tc07's consumers take 232 registers each (setmaxnreg): BM / 2 accumulators, two k-tiles of fragments (32)."""
    if p["STAGES"] < 3:
        return "STAGES must be at least 3: a stage under the wgmma group in flight, one being read, one filling"
    return None if p["BM"] // 2 + 32 + 30 <= 232 else f"about {p['BM'] // 2 + 62} registers a consumer thread, 232 left"


RUNGS = (
    ladder.Rung("tc05_tma.cu", "tc_tma_bf16", **_TMA,
                description="wgmma fed by TMA copies from a producer warpgroup, stages handed over by mbarriers, "
                            "n256 instructions where BN allows; TF32 reads a K-major copy of B made first (timed)"),
    ladder.Rung("tc06_persistent.cu", "tc_tma_bf16", **_TMA,
                description="tc05 with one persistent block per SM looping over tiles: the producer fills the next "
                            "tile's stages while the consumers store"),
    ladder.Rung("tc07_registers.cu", "tc_registers_tf32", ("BM", "STAGES", "GROUP"),
                {"BM": 256, "STAGES": 4, "GROUP": 8}, {"BM": (128, 256), "STAGES": (3, 4, 5, 6), "GROUP": (8, 16)},
                threads=lambda p: 3 * 128, tile=lambda p: (p["BM"], REGISTERS_COLUMNS), check=_registers_check,
                grid_1d=True, dynamic_smem=lambda p: _smem({**p, "BN": REGISTERS_COLUMNS}), options=(tensorcore.SM90A,),
                description="TF32 as Cᵀ = Bᵀ·Aᵀ: B's fragments loaded from its MN-major tile into registers "
                            "(wgmma's A), no copy of B; tc06's persistent blocks"),
)
PERSISTENT = {"tc06_persistent", "tc07_registers"}
KERNELS = {"tc05_tma": {"bf16": "tc_tma_bf16", "tf32": "tc_tma_tf32"},
           "tc06_persistent": {"bf16": "tc_tma_bf16", "tf32": "tc_tma_tf32"},
           "tc07_registers": {"tf32": "tc_registers_tf32"}}


@functools.cache
def _driver() -> ctypes.CDLL:
    driver = ctypes.CDLL("libcuda.so.1")
    driver.cuTensorMapEncodeTiled.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                                              *[ctypes.c_void_p] * 4, *[ctypes.c_int] * 4]
    return driver


@functools.lru_cache(maxsize=64)
def tensor_map(address: int, rows: int, cols: int, ld: int, element_bytes: int, box_rows: int):
    """The CUtensorMap of a row-major rows×cols matrix at `address` (rows ld elements apart, 16-byte aligned) of
    bfloat16 (2 bytes) or float (4), whose TMA box is box_rows × one 128-byte line, stored with the 128-byte swizzle
    and zero-filled outside the matrix: 128 bytes, as a NumPy scalar that CuPy passes by value."""
    import numpy

    words = (ctypes.c_uint64 * 16)()
    result = _driver().cuTensorMapEncodeTiled(
        words, _DATA_TYPE[element_bytes], 2, address, (ctypes.c_uint64 * 2)(cols, rows),
        (ctypes.c_uint64 * 1)(ld * element_bytes), (ctypes.c_uint32 * 2)(LINE_BYTES // element_bytes, box_rows),
        (ctypes.c_uint32 * 2)(1, 1), _NO_INTERLEAVE, _SWIZZLE_128B, _L2_PROMOTE_256B, _FILL_ZEROS)
    if result:
        raise RuntimeError(f"cuTensorMapEncodeTiled refused a {rows}×{cols} matrix of {element_bytes}-byte elements "
                           f"(CUresult {result})")
    return numpy.frombuffer(bytes(words), dtype=_tensor_map_dtype())[0]


@functools.cache
def _tensor_map_dtype():
    import numpy

    return numpy.dtype({"names": ["opaque"], "formats": [(numpy.uint64, (16,))], "itemsize": 128})


@functools.cache
def _multiprocessors(device: int) -> int:
    import cupy

    return cupy.cuda.Device(device).attributes["MultiProcessorCount"]


@dataclasses.dataclass
class Launch:
    """A built TMA rung: the ladder's compiled kernels; in TF32 also k_major_tf32's kernel and the buffers it fills
    (the last shape's, kept from call to call)."""

    compiled: ladder.Compiled
    k_major: Any = None
    buffers: dict = dataclasses.field(default_factory=dict)

    def buffer(self, name: str, shape: tuple[int, int]):
        import cupy

        if name not in self.buffers or self.buffers[name].shape != shape:
            self.buffers[name] = cupy.empty(shape, dtype=cupy.float32)
        return self.buffers[name]


def _variant(rung: ladder.Rung):
    """tensorcore's variant of the rung, built into a Launch (tc05 and tc06 in TF32 with k_major_tf32 from the rung's
    file) and launched by _run."""
    base = tensorcore.variant(rung)

    def build(mode, params, cache_dir):
        import cupy

        built = base.build(mode, params, cache_dir)
        k_major = None
        if mode == "tf32" and rung.kernel == "tc_tma_bf16":
            name = f"k_major_tf32<{TRANSPOSE_TILE}>"
            module = cupy.RawModule(code=(ladder.HERE / rung.file).read_text(), name_expressions=[name],
                                    options=("-std=c++17", f"-I{ladder.HERE}", *rung.options))
            k_major = module.get_function(name)
        return dataclasses.replace(built, artifact=Launch(built.artifact, k_major))

    def generated(mode, params):
        k_major = ((f"k_major_tf32<{TRANSPOSE_TILE}>",),) if mode == "tf32" and rung.kernel == "tc_tma_bf16" else ()
        return ladder.code(tensorcore.in_mode(rung, mode), params, k_major, rung.name in PERSISTENT)

    return dataclasses.replace(base, build=build, run=_run, generated=generated)


def _rows_aligned(launch: Launch, name: str, x, stream) -> tuple:
    """A float matrix whose rows start 16 bytes apart, as TMA needs, and their stride: x itself, or a copy in a
    buffer of padded rows (ordered on the run's stream: `with stream` would leave the null stream current)."""
    import cupy

    rows, cols = x.shape
    if cols % 4 == 0 and x.data.ptr % 16 == 0:
        return x, cols
    ld = cdiv(cols, 4) * 4
    padded = launch.buffer(name, (rows, ld))
    cupy.cuda.runtime.memcpy2DAsync(padded.data.ptr, ld * 4, x.data.ptr, cols * 4, cols * 4, rows,
                                    cupy.cuda.runtime.memcpyDeviceToDevice, stream.ptr)
    return padded, ld


def _run(launch: Launch, a, b, c, stream) -> None:
    """BF16 rows that are not 16-byte aligned run tc05's element-by-element producer (no tensor maps). TF32 always
    copies with TMA, from rows padded to 16 bytes where they are not: tc05 and tc06 from a K-major Bᵀ made first (its
    rows padded), tc07 from B as it is."""
    import cupy
    import numpy

    m, k = a.shape
    n = b.shape[1]
    params, rung = launch.compiled.params, launch.compiled.rung
    rows, cols = rung.tile(params)
    vec = None
    if a.dtype == numpy.uint16:
        vec = k % 8 == 0 and n % 8 == 0 and all(x.data.ptr % 16 == 0 for x in (a, b, c))
        maps = ((tensor_map(a.data.ptr, m, k, k, 2, rows), tensor_map(b.data.ptr, k, n, n, 2, 64)) if vec
                else (numpy.zeros((), _tensor_map_dtype())[()],) * 2)
    else:
        a_rows, lda = _rows_aligned(launch, "a", a, stream)
        if launch.k_major is None:  # tc07: B's tile as it is, lines of 32 floats along n, 32 of them (k)
            b_rows, ldb = _rows_aligned(launch, "b", b, stream)
            b_map = tensor_map(b_rows.data.ptr, k, n, ldb, 4, LINE_BYTES // 4)
        else:
            ld = cdiv(k, 4) * 4
            bt = launch.buffer("bt", (n, ld))
            launch.k_major((cdiv(n, TRANSPOSE_TILE), cdiv(k, TRANSPOSE_TILE)), (TRANSPOSE_TILE, 8),
                           (numpy.int32(k), numpy.int32(n), numpy.int32(ld), b, bt), stream=stream)
            b_map = tensor_map(bt.data.ptr, n, k, ld, 4, cols)
            vec = n % 4 == 0 and c.data.ptr % 16 == 0  # C's float2 stores
        maps = (tensor_map(a_rows.data.ptr, m, k, lda, 4, rows), b_map)
    tiles = cdiv(m, rows) * cdiv(n, cols)
    blocks = min(tiles, _multiprocessors(cupy.cuda.Device().id)) if rung.name in PERSISTENT else tiles
    launch.compiled.kernels[vec]((blocks,), (rung.threads(params),),
                                 (numpy.int32(m), numpy.int32(n), numpy.int32(k), *maps, a, b, c),
                                 shared_mem=launch.compiled.smem, stream=stream)


tensorcore.KERNELS.update(KERNELS)
for _rung in RUNGS:
    register(_variant(_rung))
