"""How the rungs fed by the Tensor Memory Accelerator (sm_90a; tc05_tma.cu … tc09_registers_tma_store.cu, and the FP32
ladder's 14_warp_specialized.cu) are launched: each operand's tensor map (cuda.h's CUtensorMap) is encoded on the host
by the driver (cuTensorMapEncodeTiled) and passed to the kernel by value; a persistent rung's grid is one block per SM;
in TF32 tc05, tc06 and tc08 first make the K-major Bᵀ that TF32 wgmma needs (TRANSPOSED), in a buffer kept from call
to call (as cuBLAS keeps a workspace), and its time counts; tc07 and tc09 read B as it is stored (AS_STORED); tc08 and
tc09 also get C's tensor map, for their stores (STORED_BY_TMA, AS_STORED_STORED_BY_TMA); rung 14 reads BM×BK boxes of A
swizzled as wide as BK and BK×BN boxes of B as they are (FFMA_TILES).
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
from typing import Any

from kernels.cupy import nvrtc
from kernels.tiles import cdiv

# The kernels' parameters, for explicit instantiations (tests) of a signature that differs from the ladder's.
PARAMETERS = ("int, int, int, const __grid_constant__ TensorMap, const __grid_constant__ TensorMap, "
              "const {operand}*, const {operand}*, float*")
STORE_PARAMETERS = ("int, int, int, const __grid_constant__ TensorMap, const __grid_constant__ TensorMap, "
                    "const __grid_constant__ TensorMap, const {operand}*, const {operand}*, float*")  # tc08's, tc09's
STORE_ROWS = 64  # the rows of C's TMA box: a consumer warpgroup's
LINE_BYTES = 128  # a swizzled line of k: the inner extent of every TMA box (64 bfloat16, 32 floats)
TRANSPOSE_TILE = 32  # k_major_tf32's tiles, of 32 × 8 threads
K_MAJOR = f"k_major_tf32<{TRANSPOSE_TILE}>"  # the kernel of a TMA rung's file that makes Bᵀ in TF32

# cuda.h's enumerators, for cuTensorMapEncodeTiled.
_DATA_TYPE = {2: 9, 4: 7}  # bytes of an element: CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, _FLOAT32
_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}  # bytes of the swizzle's span: CU_TENSOR_MAP_SWIZZLE_NONE, _32B, _64B, _128B
_NO_INTERLEAVE, _L2_PROMOTE_256B, _FILL_ZEROS = 0, 3, 0


@functools.cache
def _driver() -> ctypes.CDLL:
    driver = ctypes.CDLL("libcuda.so.1")
    driver.cuTensorMapEncodeTiled.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                                              *[ctypes.c_void_p] * 4, *[ctypes.c_int] * 4]
    return driver


@functools.lru_cache(maxsize=64)
def tensor_map(address: int, rows: int, cols: int, ld: int, element_bytes: int, box_rows: int,
               box_cols: int | None = None, swizzle: int = LINE_BYTES):
    """The CUtensorMap of a row-major rows×cols matrix at `address` (rows ld elements apart, 16-byte aligned) of
    bfloat16 (2 bytes) or float (4), whose TMA box is box_rows × box_cols (by default one 128-byte line), stored with
    the swizzle of that many bytes (0: none) and zero-filled outside the matrix: 128 bytes, as a NumPy scalar that
    CuPy passes by value."""
    import numpy

    box_cols = box_cols or LINE_BYTES // element_bytes
    words = (ctypes.c_uint64 * 16)()
    result = _driver().cuTensorMapEncodeTiled(
        words, _DATA_TYPE[element_bytes], 2, address, (ctypes.c_uint64 * 2)(cols, rows),
        (ctypes.c_uint64 * 1)(ld * element_bytes), (ctypes.c_uint32 * 2)(box_cols, box_rows),
        (ctypes.c_uint32 * 2)(1, 1), _NO_INTERLEAVE, _SWIZZLE[swizzle], _L2_PROMOTE_256B, _FILL_ZEROS)
    if result:
        raise RuntimeError(f"cuTensorMapEncodeTiled refused a {rows}×{cols} matrix of {element_bytes}-byte elements "
                           f"in {box_rows}×{box_cols} boxes (CUresult {result})")
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

    compiled: nvrtc.Compiled
    k_major: Any = None
    buffers: dict = dataclasses.field(default_factory=dict)
    c_map: bool = False  # the kernel stores C with TMA: it takes C's tensor map after B's

    def buffer(self, name: str, shape: tuple[int, int]):
        import cupy

        if name not in self.buffers or self.buffers[name].shape != shape:
            self.buffers[name] = cupy.empty(shape, dtype=cupy.float32)
        return self.buffers[name]


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


def run(launch: Launch, a, b, c, stream) -> None:
    """BF16 rows that are not 16-byte aligned run tc05's element-by-element producer (no tensor maps). TF32 always
    copies with TMA, from rows padded to 16 bytes where they are not: tc05 and tc06 from a K-major Bᵀ made first (its
    rows padded), tc07 from B as it is."""
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
        if rung.vec:  # C's rows 16-byte aligned: float2 stores, or a tensor map of C
            vec = n % 4 == 0 and c.data.ptr % 16 == 0
        maps = (tensor_map(a_rows.data.ptr, m, k, lda, 4, rows), b_map)
    if launch.c_map:  # C's rows 16-byte aligned where vec; the unaligned instance stores from registers
        maps += (tensor_map(c.data.ptr, m, n, n, 4, STORE_ROWS) if vec else numpy.zeros((), _tensor_map_dtype())[()],)
    _launch(launch, vec, maps, a, b, c, stream)


def _launch(launch: Launch, vec, maps: tuple, a, b, c, stream) -> None:
    """The kernel of instance `vec` over every tile of C, or persistent (a block per SM), given its tensor maps."""
    import cupy
    import numpy

    m, n, k = a.shape[0], b.shape[1], a.shape[1]
    params, rung = launch.compiled.params, launch.compiled.rung
    rows, cols = rung.tile(params)
    tiles = cdiv(m, rows) * cdiv(n, cols)
    blocks = min(tiles, _multiprocessors(cupy.cuda.Device().id)) if rung.persistent else tiles
    launch.compiled.kernels[vec]((blocks,), (rung.threads(params),),
                                 (numpy.int32(m), numpy.int32(n), numpy.int32(k), *maps, a, b, c),
                                 shared_mem=launch.compiled.smem, stream=stream)


def _run_ffma_tiles(launch: Launch, a, b, c, stream) -> None:
    """Rung 14 (FP32): A in boxes of BM rows × BK floats, swizzled BK × 4 bytes wide; B in boxes of BK rows × BN
    floats as they are; both from rows padded to 16 bytes where they are not. Persistent: a block per SM."""
    m, k = a.shape
    n = b.shape[1]
    params = launch.compiled.params
    a_rows, lda = _rows_aligned(launch, "a", a, stream)
    b_rows, ldb = _rows_aligned(launch, "b", b, stream)
    maps = (tensor_map(a_rows.data.ptr, m, k, lda, 4, params["BM"], params["BK"], params["BK"] * 4),
            tensor_map(b_rows.data.ptr, k, n, ldb, 4, params["BK"], params["BN"], 0))
    _launch(launch, n % 4 == 0 and c.data.ptr % 16 == 0, maps, a, b, c, stream)  # C's rows 16-byte aligned: float4s


def _launcher(transposed: bool, c_map: bool = False) -> nvrtc.Launcher:
    """A TMA rung's launch; `transposed`: in TF32 it reads the K-major Bᵀ that K_MAJOR makes first; `c_map`: it
    stores C with TMA."""
    def build(rung, mode, compiled):
        k_major = nvrtc.module(rung, [K_MAJOR]).get_function(K_MAJOR) if transposed and mode == "tf32" else None
        return Launch(compiled, k_major, c_map=c_map)

    return nvrtc.Launcher(build, run, lambda rung, mode: ((K_MAJOR,),) if transposed and mode == "tf32" else ())


TRANSPOSED, AS_STORED = _launcher(True), _launcher(False)
STORED_BY_TMA, AS_STORED_STORED_BY_TMA = _launcher(True, c_map=True), _launcher(False, c_map=True)  # tc08, tc09
FFMA_TILES = nvrtc.Launcher(lambda rung, mode, compiled: Launch(compiled), _run_ffma_tiles)  # rung 14


def parameters(launcher: nvrtc.Launcher) -> str:
    """The parameters of a TMA rung's kernels, for explicit instantiations (tests)."""
    return STORE_PARAMETERS if launcher in (STORED_BY_TMA, AS_STORED_STORED_BY_TMA) else PARAMETERS
