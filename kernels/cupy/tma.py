"""The tensor-core rungs fed by the Tensor Memory Accelerator (sm_90a, BF16): tc05_tma.cu (TMA copies, a producer
warpgroup and consumer warpgroups) and tc06_persistent.cu (the same kernel, its blocks persistent).

Declared, compiled and checked as tensorcore.py's rungs are, but launched by this module: each operand's tensor map
(cuda.h's CUtensorMap) is encoded on the host by the driver (cuTensorMapEncodeTiled) and passed to the kernel by
value, and tc06's grid is one block per SM. Opt-in as the other tensor-core rungs: a config adds
`variant_modules: [kernels.cupy.tensorcore, kernels.cupy.tma]`.
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools

from kernels.cupy import ladder, tensorcore
from kernels.registry import register
from kernels.tiles import cdiv

# The kernels' parameters, for explicit instantiations (tests) of a signature that differs from the ladder's.
PARAMETERS = ("int, int, int, const __grid_constant__ TensorMap, const __grid_constant__ TensorMap, "
              "const unsigned short*, const unsigned short*, float*")
K_TILE = 64  # bfloat16 per 128-byte swizzled line: the inner extent of every TMA box

# cuda.h's enumerators, for cuTensorMapEncodeTiled.
_BFLOAT16, _NO_INTERLEAVE, _SWIZZLE_128B, _L2_PROMOTE_256B, _FILL_ZEROS = 9, 0, 3, 3, 0


def _threads(p) -> int:
    return (p["BM"] // 64 + 1) * 128  # a producer warpgroup and a consumer warpgroup per 64 rows


def _smem(p) -> int:
    """STAGES buffers of A's BM×64 and B's 64×BN bfloat16 tiles, 1 KiB to align them to 1024 bytes, and a full and an
    empty barrier (8 bytes each) per stage."""
    return p["STAGES"] * ((p["BM"] + p["BN"]) * K_TILE * 2 + 16) + 1024


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
            dynamic_smem=_smem, options=("-arch=sm_90a",))

RUNGS = (
    ladder.Rung("tc05_tma.cu", "tc_tma_bf16", **_TMA,
                description="tc04's wgmmas fed by TMA copies from a producer warpgroup, stages handed over by "
                            "mbarriers, m64n256k16 where BN allows; BF16"),
    ladder.Rung("tc06_persistent.cu", "tc_tma_bf16", **_TMA,
                description="tc05 with one persistent block per SM looping over tiles: the producer fills the next "
                            "tile's stages while the consumers store; BF16"),
)
PERSISTENT = {"tc06_persistent"}


@functools.cache
def _driver() -> ctypes.CDLL:
    driver = ctypes.CDLL("libcuda.so.1")
    driver.cuTensorMapEncodeTiled.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                                              *[ctypes.c_void_p] * 4, *[ctypes.c_int] * 4]
    return driver


@functools.lru_cache(maxsize=64)
def tensor_map(address: int, rows: int, cols: int, box_rows: int):
    """The CUtensorMap of a row-major rows×cols bfloat16 matrix at `address` (rows 16-byte aligned) whose TMA box is
    box_rows × K_TILE, stored with the 128-byte swizzle and zero-filled outside the matrix: 128 bytes, as a NumPy
    scalar that CuPy passes by value."""
    import numpy

    words = (ctypes.c_uint64 * 16)()
    result = _driver().cuTensorMapEncodeTiled(
        words, _BFLOAT16, 2, address, (ctypes.c_uint64 * 2)(cols, rows), (ctypes.c_uint64 * 1)(cols * 2),
        (ctypes.c_uint32 * 2)(K_TILE, box_rows), (ctypes.c_uint32 * 2)(1, 1), _NO_INTERLEAVE, _SWIZZLE_128B,
        _L2_PROMOTE_256B, _FILL_ZEROS)
    if result:
        raise RuntimeError(f"cuTensorMapEncodeTiled refused a {rows}×{cols} bfloat16 matrix (CUresult {result})")
    return numpy.frombuffer(bytes(words), dtype=_tensor_map_dtype())[0]


@functools.cache
def _tensor_map_dtype():
    import numpy

    return numpy.dtype({"names": ["opaque"], "formats": [(numpy.uint64, (16,))], "itemsize": 128})


@functools.cache
def _multiprocessors(device: int) -> int:
    import cupy

    return cupy.cuda.Device(device).attributes["MultiProcessorCount"]


def _run(compiled: ladder.Compiled, a, b, c, stream) -> None:
    """TMA needs 16-byte aligned rows: other shapes run the kernel's element-by-element producer (no tensor maps)."""
    import cupy
    import numpy

    m, k = a.shape
    n = b.shape[1]
    params = compiled.params
    aligned = k % 8 == 0 and n % 8 == 0 and all(x.data.ptr % 16 == 0 for x in (a, b, c))
    maps = ((tensor_map(a.data.ptr, m, k, params["BM"]), tensor_map(b.data.ptr, k, n, K_TILE)) if aligned
            else (numpy.zeros((), _tensor_map_dtype())[()],) * 2)
    tiles = cdiv(m, params["BM"]) * cdiv(n, params["BN"])
    blocks = min(tiles, _multiprocessors(cupy.cuda.Device().id)) if compiled.rung.name in PERSISTENT else tiles
    compiled.kernels[aligned]((blocks,), (_threads(params),),
                              (numpy.int32(m), numpy.int32(n), numpy.int32(k), *maps, a, b, c),
                              shared_mem=compiled.smem, stream=stream)


tensorcore.KERNELS.update({rung.name: {"bf16": rung.kernel} for rung in RUNGS})
for _rung in RUNGS:
    register(dataclasses.replace(tensorcore.variant(_rung), run=_run))
