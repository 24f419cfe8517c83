"""The TVM family: one schedule per file, each a variant: the book's d2l schedule (01), the same with its
shared-memory traffic vectorised and tuned (02), dlight's default rule (03), MetaSchedule-tuned (04), the CuPy
ladder's FP32 recipe (05) and the tensor cores through TVM's WMMA intrinsics (06, BF16); and one kernel written in
TIRx, TVM's tile-level kernel language, rather than scheduled: Hopper's wgmma fed by TMA (07, BF16 and TF32), and in
TF32 with wgmma's A operand from registers, so that B needs no transposing copy (08).

Every variant writes C = A @ B once in TE (te.compute), turns it into a TensorIR PrimFunc (te.create_prim_func)
and lets its schedule file transform that; TVM generates the CUDA source (tvm.compile for
{"kind": "cuda", "arch": "sm_XY"}). TVM only supplies the source: CuPy compiles it with NVRTC (RawModule, as the
CuPy ladder does) and launches it on the current CuPy stream, so timing and streams are the harness's own and
TVM's CUDA runtime never touches the device.

Shapes are static per kernel, as TVM schedules are usually compiled: the loop bounds and the padding
predicates are constants, as they would be for a model's fixed layer shapes. The artifact therefore holds one
kernel per (m, n, k), compiled (TVM codegen plus NVRTC, both cached on disk) when first asked for. `build` compiles
one representative shape (a tuned schedule's own shape) so that a bad parameter set fails at build time and the
build facts (registers, shared and local memory) are read off a real kernel; then, as the variant's `prepare`,
every planned shape, so that validation and timing (which hold the GPU) load kernels instead of generating them.
A shape not compiled ahead is compiled by its first launch, validation's or the warm-up's, never a timed one. The
grid and block are the extents of the scheduled PrimFunc's blockIdx/threadIdx loops, and a kernel that keeps its
tiles in dynamic shared memory is launched with the bytes TVM allocated there; the generated kernel takes exactly the
three pointers A, B, C. A schedule declares its modes (MODES, fp32 where it does not): the operands' dtype.

A TIRx kernel (its module's `kernel(params, mode)`) takes M, N and K as arguments, so one kernel serves every shape:
it is generated and compiled once, with the kernels its module's `helpers` adds (launched before it, e.g. to lay an
operand out), and its module's `launch` gives each launch's kernel, grid, block and arguments by name (tensor maps
among them).
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from kernels import sass
from kernels.registry import TVM, Built, Variant, register

HERE = Path(__file__).parent
SCHEDULES = ("01_d2l.py", "02_d2l_vectorized.py", "03_dlight.py", "04_metaschedule.py", "05_recipe.py", "06_wmma.py")
# written in TIRx, TVM's tile-level kernel language, rather than scheduled
KERNELS = ("07_tirx_wgmma.py", "08_tirx_registers.py")
OPERAND_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}  # TVM's name of each mode's operand type
REPRESENTATIVE_SHAPE = (1024, 1024, 1024)  # (m, n, k) of the kernel `build` compiles for its facts
LAUNCH_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z"), ("threadIdx.x", "threadIdx.y", "threadIdx.z")


def schedule_module(file: str):
    """A schedule's module (file names start with their rung number, so they are imported by path name)."""
    return importlib.import_module(f"kernels.tvm.{Path(file).stem}")


def sources(file: str) -> list[Path]:
    """The schedule's file, those of the schedules it applies (its USES), and this module: what its code is made of."""
    return [HERE / f for f in (file, *getattr(schedule_module(file), "USES", ()))] + [Path(__file__)]


def modes(file: str) -> tuple[str, ...]:
    return getattr(schedule_module(file), "MODES", ("fp32",))


def written_in_tirx(file: str) -> bool:
    """A kernel written in TIRx (its module's `kernel(params, mode)`: one PrimFunc for every shape, M, N and K its
    arguments), not a schedule of the matmul."""
    return hasattr(schedule_module(file), "kernel")


def matmul(m: int, n: int, k: int, mode: str = "fp32"):
    """C = A @ B for row-major A (m×k), B (k×n) of the mode's operand type and float32 C, accumulated in float32, as
    a TensorIR PrimFunc whose reduction block is "C"."""
    from tvm import te

    a = te.placeholder((m, k), OPERAND_DTYPES[mode], name="A")
    b = te.placeholder((k, n), OPERAND_DTYPES[mode], name="B")
    r = te.reduce_axis((0, k), name="k")

    def wide(x):  # as float32 (a float32 operand as it is, so that the FP32 schedules see the book's matmul)
        return x if x.dtype == "float32" else x.astype("float32")
    c = te.compute((m, n), lambda i, j: te.sum(wide(a[i, r]) * wide(b[r, j]), axis=r), name="C")
    return te.create_prim_func([a, b, c])


def cuda_target(arch: str):
    import tvm

    return tvm.target.Target({"kind": "cuda", "arch": arch})


def scheduled(file: str, params: Mapping, shape: tuple[int, int, int], target, bind: bool = True,
              mode: str | None = None):
    """The schedule of `file` applied to the matmul of `shape` in `mode` (its first by default; an s_tir.Schedule)."""
    return schedule_module(file).schedule(matmul(*shape, mode or modes(file)[0]), params, target, bind)


# Without it, a schedule's async pipeline stages (MetaSchedule's, for one) are lowered to plain register-staged
# copies: only the cp.async commit and wait instructions remain, and every tile's global loads stall the warps.
PASS_CONFIG = {"tirx.use_async_copy": True}


def pass_config(file: str, params: Mapping) -> dict:
    """TVM's lowering options for a schedule with `params`: the family's, and those its module asks for
    (`pass_config(params)`, where it has one)."""
    own = getattr(schedule_module(file), "pass_config", None)
    return {**PASS_CONFIG, **(own(params) if own else {})}


def cuda_source(sch, target, config: Mapping = PASS_CONFIG) -> str:
    """The CUDA C++ that TVM generates for a scheduled matmul (no CUDA toolkit or GPU needed), lowered with
    `config` (pass_config's)."""
    import tvm

    with tvm.transform.PassContext(config=dict(config)):
        return str(tvm.compile(sch.mod, target=target).mod.imports[0].inspect_source())


def dynamic_shared_bytes(sch, target, config: Mapping = PASS_CONFIG) -> int:
    """The bytes of dynamic shared memory TVM allocates for the scheduled kernel (its "shared.dyn" buffers, merged
    where their lifetimes do not overlap), which the launch must pass; 0 for a kernel of static shared memory."""
    import tvm
    from tvm import s_tir, tirx

    with tvm.transform.PassContext(config=dict(config)):
        lowered = tirx.get_default_tir_pipeline(target)[0](tirx.transform.BindTarget(target)(sch.mod))
    return int(s_tir.analysis.calculate_allocated_bytes(lowered)["main"].get("shared.dyn", 0))


# NVRTC has no cuda.h: the tensor-map parameter type of a TIRx kernel, with cuda.h's layout (as TVM's own NVRTC
# path defines it, tvm/support/nvcc.py)
TENSOR_MAP = ("#ifdef __CUDACC_RTC__\nstruct alignas(64) CUtensorMap_st { unsigned long long opaque[16]; };\n"
              "typedef struct CUtensorMap_st CUtensorMap;\n#endif\n")


def tirx_source(file: str, params: Mapping, target, mode: str) -> str:
    """The CUDA C++ TVM generates for the TIRx kernel of `file` with `params` in `mode`, and for its helpers (TVM's
    tirx pipeline; no GPU needed), with the tensor-map type NVRTC lacks."""
    import tvm

    functions = {"main": schedule_module(file).kernel(params, mode), **helpers(file, params, mode)}
    source = str(tvm.compile(tvm.IRModule(functions), target=target, tir_pipeline="tirx")
                 .mod.imports[0].inspect_source())
    return TENSOR_MAP + source if "CUtensorMap" in source else source


def tirx_kernels(file: str, params: Mapping, mode: str, source: str) -> dict[str, dict]:
    """The kernels of a TIRx source (tirx_source's) by the names its module's `launch` gives them ("main": the
    product's; TVM names a helper's kernel after its function, "<name>_kernel"), each with its CUDA name and
    parameter names."""
    named = {name: f"{name}_kernel" for name in helpers(file, params, mode)}
    (main,) = set(kernel_names(source)) - set(named.values())
    return {name: {"name": cuda, "parameters": kernel_parameters(source, cuda)}
            for name, cuda in {"main": main, **named}.items()}


def helpers(file: str, params: Mapping, mode: str) -> dict:
    """The kernels a TIRx module launches before its product's, by name (its `helpers`, if it has any)."""
    module = schedule_module(file)
    return module.helpers(params, mode) if hasattr(module, "helpers") else {}


def kernel_parameters(source: str, name: str | None = None) -> list[str]:
    """The names of kernel `name`'s parameters (by default the source's one kernel), in order (a TIRx kernel's order
    is TVM's)."""
    found = re.search(rf"{name or kernel_name(source)}\(([^)]*)\)", source)
    return [parameter.split()[-1] for parameter in found.group(1).split(",")]


def kernel_names(source: str) -> list[str]:
    return sorted(set(re.findall(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(', source)))


def kernel_name(source: str) -> str:
    names = kernel_names(source)
    if len(names) != 1:
        raise ValueError(f"expected one kernel in TVM's CUDA source, found {names}")
    return names[0]


def launch_dims(sch) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid, block): the extents of the loops bound to blockIdx.* and threadIdx.* in the scheduled PrimFunc.
    Loops of different blocks bound to one thread axis (the cooperative fetches) share its extent."""
    extents: dict[str, int] = {}
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        for loop in map(sch.get, sch.get_loops(block)):
            if loop.thread_binding is not None:
                tag = loop.thread_binding.thread_tag
                extent = int(loop.extent)
                if extents.setdefault(tag, extent) != extent:
                    raise ValueError(f"{tag} is bound to loops of extents {extents[tag]} and {extent}")
    grid, block = (tuple(extents.get(tag, 1) for tag in axes) for axes in LAUNCH_AXES)
    return grid, block


def nvrtc_options() -> tuple[str, ...]:
    """NVRTC options for TVM's source: it includes <cuda/std/cstdint> under NVRTC, which CuPy bundles (CCCL's
    libcudacxx) but does not put on RawModule's include path by itself, and for bf16 and WMMA <cuda_bf16.h> and
    <mma.h> (cuda_headers)."""
    from cupy._core import core

    return ("-std=c++17", *core._get_cccl_include_options(), *(f"-I{path}" for path in cuda_headers()))


def cuda_headers() -> list[str]:
    """The CUDA toolkit's headers that match the NVRTC CuPy compiles with: the toolkit's under CUDA_PATH when it is
    set (CuPy then uses that toolkit's NVRTC), else those of the CUDA runtime wheel the README installs."""
    if os.environ.get("CUDA_PATH"):
        return [str(Path(os.environ["CUDA_PATH"]) / "include")]
    import nvidia

    return [str(path) for path in (Path(p) / "cu13" / "include" for p in nvidia.__path__) if path.is_dir()][:1]


@dataclass
class Kernel:
    function: object  # cupy.RawKernel
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shape: tuple[int, int, int]  # (m, n, k)
    sass: dict  # the loaded cubin's SASS facts (sass.facts: counts of all its kernels, or why they could not be read)
    shared_dyn: int  # bytes of dynamic shared memory each launch passes
    # a TIRx source's kernels by the names its module's launch gives them: (function, its parameters' names); a
    # schedule's one kernel takes A, B and C
    launched: dict = field(default_factory=dict)


@dataclass
class Compiled:
    """A schedule with its parameters for one GPU architecture, and its kernels compiled so far by shape."""

    file: str
    params: dict
    arch: str
    mode: str
    cache_dir: str | None = None  # TVM's generated source per shape, kept across processes (see generated)
    kernels: dict = field(default_factory=dict)  # (m, n, k) -> Kernel; () -> a TIRx kernel's, for every shape
    buffers: dict = field(default_factory=dict)  # a TIRx kernel's launch's, kept from call to call

    @functools.cached_property
    def module(self):
        """The schedule's or kernel's module, looked up once: every launch asks it (a TIRx kernel's launch)."""
        return schedule_module(self.file)

    @functools.cached_property
    def tirx(self) -> bool:
        return written_in_tirx(self.file)

    @functools.cached_property
    def arch_suffix(self) -> str:
        """What the kernel's architecture adds to the GPU's ("a": sm_90a, for wgmma)."""
        return getattr(self.module, "ARCH_SUFFIX", "")

    def kernel(self, m: int, n: int, k: int) -> Kernel:
        shape = () if self.tirx else (m, n, k)
        if shape not in self.kernels:
            self.kernels[shape] = self._compile(shape)
        return self.kernels[shape]

    def _compile(self, shape) -> Kernel:
        import cupy

        generated = self.generated(shape)
        with tempfile.TemporaryDirectory() as scratch:
            path = self._cached(shape, ".cubin") or Path(scratch) / "kernel.cubin"
            if not path.exists():
                self._keep(path, self.cubin(generated["source"]))
            module = cupy.RawModule(path=str(path))  # the very cubin whose SASS the facts are read from
            launched = {name: (module.get_function(k["name"]), tuple(k["parameters"]))
                        for name, k in generated.get("kernels", {}).items()}
            function = launched["main"][0] if launched else module.get_function(kernel_name(generated["source"]))
            if generated["shared_dyn"] > 48 * 1024:  # over the default limit: the kernel must ask for it
                function.max_dynamic_shared_size_bytes = generated["shared_dyn"]
            if "sass" not in generated:
                generated["sass"] = sass.facts(path.read_bytes())
                self._keep(self._cached(shape), generated)
        return Kernel(function, tuple(generated["grid"]), tuple(generated["block"]), tuple(shape), generated["sass"],
                      generated["shared_dyn"], launched)

    def cubin(self, source: str) -> bytes:
        """NVRTC's cubin of TVM's source for this architecture (compiled here, not by RawModule, so that the
        kernel that runs and the one whose SASS is read are one file)."""
        from cupy.cuda import compiler

        # an option: CuPy's arch is a number
        options = nvrtc_options() + ((f"-arch={self.arch}{self.arch_suffix}",) if self.arch_suffix else ())
        cubin, _ = compiler.compile_using_nvrtc(source, options, arch=self.arch.removeprefix("sm_"))
        return cubin

    def generated(self, shape) -> dict:
        """TVM's CUDA source, launch extents and dynamic shared bytes for `shape`. They are kept in cache_dir/tvm
        under a key of all that determines them (this family's and the schedule's source, the parameters, the shape,
        the architecture and TVM's version), so another process neither imports TVM nor schedules again."""
        path = self._cached(shape)
        if path and path.exists():
            return json.loads(path.read_text())
        target = cuda_target(self.arch)
        if self.tirx:  # launched as its module's `launch` says, whatever the shape
            source = tirx_source(self.file, self.params, cuda_target(self.arch + self.arch_suffix), self.mode)
            return self._keep(path, {"source": source, "grid": (), "block": (), "shared_dyn":
                                     self.module.shared_bytes(self.params),
                                     "kernels": tirx_kernels(self.file, self.params, self.mode, source)})
        sch = scheduled(self.file, self.params, shape, target, mode=self.mode)
        grid, block = launch_dims(sch)
        config = pass_config(self.file, self.params)
        source = cuda_source(sch, target, config)
        shared_dyn = dynamic_shared_bytes(sch, target, config) if "extern __shared__" in source else 0
        return self._keep(path, {"source": source, "grid": grid, "block": block, "shared_dyn": shared_dyn})

    def _cached(self, shape, suffix: str = ".json") -> Path | None:
        """Where the generated source (.json) or its cubin (.cubin) of `shape` is kept, under a key of all that
        determines them, NVRTC's version included (None without a cache_dir)."""
        from importlib import metadata

        from cupy.cuda import nvrtc

        if not self.cache_dir:
            return None
        digest = hashlib.sha256(b"".join(path.read_bytes() for path in sources(self.file)))
        digest.update(json.dumps([self.params, list(shape), self.arch, self.mode, metadata.version("apache-tvm"),
                                  nvrtc.getVersion()], sort_keys=True).encode())
        return Path(self.cache_dir) / "tvm" / f"{Path(self.file).stem}-{digest.hexdigest()[:16]}{suffix}"

    @staticmethod
    def _keep(path: Path | None, content):
        """`content` (JSON data, or bytes as they are) written to `path` atomically, if there is one."""
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
            tmp.replace(path)
        return content


def current_arch() -> str:
    import cupy

    return "sm_" + cupy.cuda.Device().compute_capability


def _build(file: str, mode: str, params: Mapping, cache_dir) -> Built:
    module = schedule_module(file)
    problem = module.check(params)
    if problem:
        raise ValueError(f"{Path(file).stem} cannot use {dict(params)}: {problem}")
    compiled = Compiled(file, dict(params), current_arch(), mode, str(cache_dir) if cache_dir else None)
    if compiled.arch_suffix and compiled.arch != "sm_90":
        raise ValueError(f"{Path(file).stem} needs sm_90a (wgmma), and this GPU is {compiled.arch}")
    kernel = compiled.kernel(*(params.get("tuned_shape") or REPRESENTATIVE_SHAPE))
    function = kernel.function
    threads = module.threads(params) if compiled.tirx else kernel.block[0] * kernel.block[1] * kernel.block[2]
    facts = {"registers": function.num_regs, "local_bytes": function.local_size_bytes,
             "shared_bytes": function.shared_size_bytes + kernel.shared_dyn, "threads": threads,
             "arch": compiled.arch + compiled.arch_suffix, **kernel.sass}
    return Built(compiled, facts)


def _run(compiled: Compiled, a, b, c, stream) -> None:
    m, k = a.shape
    kernel = compiled.kernel(m, b.shape[1], k)
    if kernel.launched:  # a TIRx kernel: its module gives the launches and their arguments
        for name, grid, block, arguments in compiled.module.launch(compiled.params, a, b, c, compiled.buffers, stream):
            function, parameters = kernel.launched[name]
            function(grid, block, tuple(arguments[p] for p in parameters), stream=stream,
                     shared_mem=kernel.shared_dyn if name == "main" else 0)
        return
    kernel.function(kernel.grid, kernel.block, (a, b, c), stream=stream, shared_mem=kernel.shared_dyn)


def _tuner(module):
    """A schedule's own search (MetaSchedule), for the tune stage: it tunes for the GPU this process sees."""
    if not hasattr(module, "search"):
        return None

    def tune(mode, shape, trials, work_dir, committed, seed, log, measure):
        return module.search(shape, cuda_target(current_arch()), trials, work_dir, committed, seed, log, measure)
    return tune


PROBE_SHAPES = ((4096, 4096, 4096), (1000, 999, 1001))  # TVM specialises per shape: the code of two of them


def code(file: str, params: Mapping, mode: str) -> dict:
    """What TVM makes of the schedule for `params` (its CUDA source for sm_90 at two shapes, and their launch
    extents), with no GPU: a tuning record's winners are migrated on it (kernels/machine_code.py)."""
    from importlib import metadata

    from kernels import machine_code

    made = [Compiled(file, dict(params), "sm_90", mode).generated(shape) for shape in PROBE_SHAPES]
    return {"compiler": f"apache-tvm {metadata.version('apache-tvm')}",
            "source": machine_code.digest([m["source"].encode() for m in made]),
            "launch": [[list(m["grid"]), list(m["block"])] for m in made]}


def _variant(file: str) -> Variant:
    module = schedule_module(file)
    # a TIRx kernel serves every shape: nothing to compile ahead per shape
    prepare = None if written_in_tirx(file) else lambda compiled, m, n, k: compiled.kernel(m, n, k)
    return Variant(family="tvm", name=Path(file).stem, device="cuda", modes=modes(file),
                   build=lambda mode, params, cache_dir: _build(file, mode, params, cache_dir), run=_run,
                   params=dict(module.DEFAULTS), space=dict(module.SPACE), check_params=module.check,
                   tuner=_tuner(module), source_files=tuple(map(str, sources(file))), compilers=TVM,
                   description=module.DESCRIPTION, prepare=prepare,
                   generated=lambda mode, params: code(file, params, mode))


for _file in SCHEDULES + KERNELS:
    register(_variant(_file))
