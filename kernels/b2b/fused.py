"""Fused back-to-back GEMM in CuPy raw CUDA: D = (A0·B0)·B1 with the intermediate kept on chip.

One CUDA file per rung (01_fused_simt.cu: FP32 FFMA, 02_fused_mma.cu: TF32 tensor cores, 03_fused_warptile.cu: FP32
FFMA in float4 warp tiles) over one kernel body (fused.cuh). A block owns 64 rows of D and spans all of N0 and N1,
so each kernel is instantiated for the capacities N0, N1 ≤ 64, 128, 256; wider shapes are declared unsupported.
04_fused_resident.cu (TF32) is for narrow shapes only (K0, N0, N1 ≤ 64): persistent blocks hold B0 and B1 and stream
A0. 05_fused_wgmma.cu (TF32, sm_90a) takes the same shapes (K0 a multiple of 4) on Hopper's warpgroup MMAs, A0
arriving by TMA (its tensor map made here). Every instantiation is compiled at build time (NVRTC), with a float4
(16-byte cp.async) path for aligned rows and a 4-byte one for the rest (rung 5: float2 or 4-byte stores of D).
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from pathlib import Path

from kernels import machine_code
from kernels.cupy import nvrtc
from kernels.cupy.tensorcore import tma
from kernels.registry import NVRTC, Built, Variant
from kernels.tiles import cdiv

HERE = Path(__file__).parent
TENSORCORE = HERE.parent / "cupy" / "tensorcore"  # rung 5's wgmma and TMA helpers (tc05_tma.cu and what it includes)
CAPACITIES = (64, 128, 256)  # compile-time widths of the A1 slice (N0) and of the D tile (N1)
INSTANCES = tuple(itertools.product(CAPACITIES, CAPACITIES, (True, False)))  # (np0, np1, 16-byte copies)
ROWS_PER_BLOCK, THREADS, BK, PAD, PAD_B = 64, 256, 32, 4, 8  # as in fused.cuh
INT32_ELEMENTS = 2**31


@dataclass(frozen=True)
class Rung:
    file: str
    kernel: str
    modes: tuple[str, ...]
    description: str
    resident: bool = False  # K0, N0, N1 ≤ RESIDENT, B0 and B1 held by persistent blocks (RESIDENT_BLOCKS per SM)
    wgmma: bool = False  # rung 5: resident's shapes on wgmma (sm_90a), a block per SM, A0 by TMA

    @property
    def name(self) -> str:
        return "b2b_fused_" + self.kernel.rsplit("_", 1)[1]

    @property
    def narrow(self) -> bool:
        """K0, N0, N1 ≤ RESIDENT, held by persistent blocks: one compiled width, a grid of blocks_per_sm per SM."""
        return self.resident or self.wgmma

    @property
    def blocks_per_sm(self) -> int:
        return 1 if self.wgmma else RESIDENT_BLOCKS

    @property
    def unsupported(self):
        """The rung's check of a shape (unsupported_wgmma, unsupported_resident or unsupported)."""
        return unsupported_wgmma if self.wgmma else unsupported_resident if self.resident else unsupported


RESIDENT, RESIDENT_BLOCKS = 64, 2  # as in 04_fused_resident.cu
# 05_fused_wgmma.cu's instantiation: warpgroups that take turns at the tiles, A0's tiles in flight (a multiple of them)
WGMMA_CONSUMERS, WGMMA_STAGES = 4, 4
OPERAND_FLOATS = RESIDENT * RESIDENT  # B0ᵀ, B1ᵀ or a stage of A0 in rung 5's shared memory


def capacity(n: int) -> int | None:
    """The narrowest compiled width that holds n columns (None: wider than any)."""
    return next((c for c in CAPACITIES if n <= c), None)


def smem_bytes(np0: int, np1: int) -> int:
    np_ = max(np0, np1)
    return 4 * (ROWS_PER_BLOCK * (np_ + PAD) + 2 * ROWS_PER_BLOCK * (BK + PAD) + 2 * BK * (np_ + PAD_B))


def resident_smem_bytes() -> int:
    """B0 and B1, the A1 slice and two stages of A0 (04_fused_resident.cu)."""
    return 4 * (2 * RESIDENT * (RESIDENT + PAD_B) + 3 * ROWS_PER_BLOCK * (RESIDENT + PAD))


def wgmma_smem_bytes() -> int:
    """1 KiB of slack (the operands start 1024-byte aligned, as the swizzle needs), B0ᵀ, B1ᵀ, the stages of A0 and
    their two barriers each (05_fused_wgmma.cu)."""
    return 1024 + 4 * OPERAND_FLOATS * (2 + WGMMA_STAGES) + 16 * WGMMA_STAGES


def threads(rung: Rung) -> int:
    return WGMMA_CONSUMERS * 128 + 32 if rung.wgmma else THREADS  # rung 5: the consumers and a producer warp


def unsupported_wgmma(m, k0, n0, n1, params) -> str | None:
    if k0 % 4:
        return (f"k0 = {k0}: TMA reads A0's rows, which must lie 16 bytes apart (k0 a multiple of 4); "
                "b2b_fused_resident takes these shapes")
    return unsupported_resident(m, k0, n0, n1, params)


def unsupported_resident(m, k0, n0, n1, params) -> str | None:
    if max(k0, n0, n1) > RESIDENT:
        return f"k0 = {k0}, n0 = {n0}, n1 = {n1}: B0 and B1 stay in shared memory, up to {RESIDENT} each way"
    return unsupported(m, k0, n0, n1, params)


def unsupported(m, k0, n0, n1, params) -> str | None:
    if capacity(n0) is None or capacity(n1) is None:
        return (f"n0 = {n0}, n1 = {n1}: a block spans all of N0 and N1 (the intermediate stays on chip), "
                f"up to {CAPACITIES[-1]} each")
    if max(m * k0, m * n1, k0 * n0, n0 * n1) >= INT32_ELEMENTS:
        return "a matrix with 2^31 or more elements (the kernels index rows with 32-bit int)"
    return None


def expression(rung: Rung, np0: int, np1: int, vec: bool) -> str:
    flag = "true" if vec else "false"
    if rung.wgmma:
        return f"{rung.kernel}<{WGMMA_CONSUMERS}, {WGMMA_STAGES}, {flag}>"
    return f"{rung.kernel}<{flag}>" if rung.resident else f"{rung.kernel}<{np0}, {np1}, {flag}>"


def instances(rung: Rung) -> tuple:
    return ((RESIDENT, RESIDENT, True), (RESIDENT, RESIDENT, False)) if rung.narrow else INSTANCES


def _smem(rung: Rung, np0: int, np1: int) -> int:
    if rung.wgmma:
        return wgmma_smem_bytes()
    return resident_smem_bytes() if rung.resident else smem_bytes(np0, np1)


def compile_options(rung: Rung) -> tuple[str, ...]:
    if rung.wgmma:
        return "-std=c++17", f"-I{HERE}", f"-I{TENSORCORE}", f"-I{TENSORCORE.parent}", nvrtc.SM90A
    return "-std=c++17", f"-I{HERE}"


def _build(rung: Rung, mode, params, cache_dir) -> Built:
    import cupy

    if rung.wgmma and nvrtc.compute_capability() != "90":
        raise ValueError(f"{rung.name} is built for sm_90a (wgmma, TMA), which only sm_90 GPUs run "
                         f"(this one is sm_{nvrtc.compute_capability()})")
    names = {inst: expression(rung, *inst) for inst in instances(rung)}
    module = cupy.RawModule(code=(HERE / rung.file).read_text(), options=compile_options(rung),
                            name_expressions=list(names.values()))
    kernels, facts = {}, {"kernel": rung.kernel, "threads": threads(rung), "instances": len(names)}
    for inst, name in names.items():
        kernel = kernels[inst] = module.get_function(name)
        kernel.max_dynamic_shared_size_bytes = _smem(rung, *inst[:2])
        # the widest instance stands for the build; any spill anywhere is reported
        facts["local_bytes"] = max(facts.get("local_bytes", 0), kernel.local_size_bytes)
    widest = max(names, key=lambda inst: (inst[0] * inst[1], inst[2]))
    facts.update(registers=kernels[widest].num_regs, shared_bytes=_smem(rung, *widest[:2]))
    return Built(kernels, facts)


@functools.cache
def _multiprocessors(device: int) -> int:
    """Read once per device: `attributes` queries every attribute, too slow for each launch."""
    import cupy

    return cupy.cuda.Device(device).attributes["MultiProcessorCount"]


def _run(rung: Rung, kernels, a0, b0, b1, d, stream) -> None:
    import cupy
    import numpy as np

    m, k0 = a0.shape
    n0, n1 = b1.shape
    blocks = cdiv(m, ROWS_PER_BLOCK)
    if rung.wgmma:  # A0 through its tensor map (64-row boxes of 32 floats, swizzled); float2 stores of D if aligned
        vec = n1 % 2 == 0 and d.data.ptr % 8 == 0
        a0 = tma.tensor_map(a0.data.ptr, m, k0, k0, 4, ROWS_PER_BLOCK, tma.LINE_BYTES // 4)
    else:
        vec = k0 % 4 == 0 and n0 % 4 == 0 and n1 % 4 == 0 and all(x.data.ptr % 16 == 0 for x in (a0, b0, b1, d))
    np0, np1 = (RESIDENT, RESIDENT) if rung.narrow else (capacity(n0), capacity(n1))
    if rung.narrow:
        blocks = min(blocks, rung.blocks_per_sm * _multiprocessors(cupy.cuda.Device().id))
    kernels[(np0, np1, vec)]((blocks,), (threads(rung),),
                             (np.int32(m), np.int32(k0), np.int32(n0), np.int32(n1), a0, b0, b1, d),
                             shared_mem=_smem(rung, np0, np1), stream=stream)


def variant(rung: Rung) -> Variant:
    return Variant(family="cupy", name=rung.name, device="cuda", modes=rung.modes, workload="b2b",
                   build=lambda mode, params, cache_dir: _build(rung, mode, params, cache_dir),
                   run=lambda *args: _run(rung, *args),
                   unsupported=rung.unsupported,
                   source_files=(str(HERE / rung.file), *map(str, machine_code.included(HERE / rung.file))),
                   compilers=NVRTC, description=rung.description)
