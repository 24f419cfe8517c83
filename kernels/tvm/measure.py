"""MetaSchedule's builder and runner for CUDA, in this process, the way the family runs its kernels.

TVM's LocalBuilder and LocalRunner export every candidate as a library, link it with a host compiler and load it
in pools of worker processes. On a GPU node where those workers start slowly, every build timed out at TVM's
defaults, and with longer timeouts a round of 64 candidates still had no result after six minutes. Here a
candidate is what the pipeline runs: TVM's CUDA source and its launch extents (SourceBuilder), compiled by NVRTC
through CuPy and timed with CUDA events on the current stream (CupyRunner), so a tuned time is the time of the
kernel the benchmark will run.
"""
from __future__ import annotations

import json
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.runner import PyRunner, PyRunnerFuture, RunnerResult

MIN_REPEAT_S = 0.02  # each repeat runs the kernel enough times to last this long
REPEATS = 3
SLOW_S = 0.5  # a candidate whose first run takes longer is timed by that run alone


def compile_with_cupy(source: str):
    import cupy

    from kernels.tvm import family

    return cupy.RawModule(code=source, options=family.nvrtc_options()).get_function(family.kernel_name(source))


@derived_object
class SourceBuilder(PyBuilder):
    """A candidate's CUDA source, kernel name and launch extents, as a JSON file in a directory of its own (which
    MetaSchedule removes once the candidate is measured)."""

    def __init__(self, workers: int = 8):
        super().__init__()
        self.workers = workers

    def build(self, build_inputs):
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(self._build_one, build_inputs))

    def _build_one(self, build_input):
        from tvm import s_tir

        from kernels.tvm import family

        try:
            sch = s_tir.Schedule(build_input.mod)
            source = family.cuda_source(sch, build_input.target)
            grid, block = family.launch_dims(sch)
            compile_with_cupy(source)  # here, in parallel: the runner then loads it from CuPy's kernel cache
            path = Path(tempfile.mkdtemp(prefix="gemmbench-tvm-candidate-")) / "candidate.json"
            path.write_text(json.dumps({"source": source, "grid": grid, "block": block}))
            return BuilderResult(str(path), None)
        except Exception as exc:  # MetaSchedule records the candidate as failed and goes on
            return BuilderResult(None, f"{type(exc).__name__}: {exc}")


@derived_object
class Measured(PyRunnerFuture):
    def __init__(self, result):
        super().__init__()
        self._result = result

    def done(self) -> bool:
        return True

    def result(self):
        return self._result


@derived_object
class CupyRunner(PyRunner):
    """Times each candidate on fresh random float32 operands of `shape`, (m, n, k), allocated once."""

    def __init__(self, shape):
        import cupy

        super().__init__()
        m, n, k = shape
        rng = cupy.random.default_rng(0)
        self.a = rng.standard_normal((m, k), dtype=cupy.float32)
        self.b = rng.standard_normal((k, n), dtype=cupy.float32)
        self.c = cupy.empty((m, n), dtype=cupy.float32)

    def run(self, runner_inputs):
        return [Measured(self._time(Path(i.artifact_path))) for i in runner_inputs]

    def _time(self, artifact: Path):
        import cupy

        try:
            built = json.loads(artifact.read_text())
            function = compile_with_cupy(built["source"])
            grid, block = tuple(built["grid"]), tuple(built["block"])

            def launch(times: int) -> float:
                start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                start.record()
                for _ in range(times):
                    function(grid, block, (self.a, self.b, self.c))
                stop.record()
                stop.synchronize()
                return cupy.cuda.get_elapsed_time(start, stop) / 1e3 / times

            first = launch(1)
            if first > SLOW_S:
                return RunnerResult([first], None)
            times = max(1, int(MIN_REPEAT_S / max(first, 1e-6)))
            return RunnerResult([launch(times) for _ in range(REPEATS)], None)
        except Exception as exc:
            return RunnerResult(None, f"{type(exc).__name__}: {exc}")
