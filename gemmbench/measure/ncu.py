"""Nsight Compute counters of one launch: the fixed metric set the profile stage asks `ncu` for, and its raw CSV
page turned into one record per kernel.

The stage runs a worker under `ncu --profile-from-start off`: the worker compiles (loads) the variant, launches it once
to warm up, and wraps one more launch in cudaProfilerStart/Stop, so that only the kernels of that launch are profiled
(cuBLAS's and TVM's included, by name), not the harness's own (inputs, poisoning, references).
"""
from __future__ import annotations

import csv
import io
import re

# column -> (metric, what it says); every launch is asked for all of them, and a column the GPU or ncu lacks is empty
METRICS = {
    "duration_s": ("gpu__time_duration.sum", "the launch's duration on the GPU (ncu's, clocks not locked)"),
    "sm_throughput_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM throughput, % of peak"),
    "memory_throughput_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                              "memory throughput (the busiest of DRAM, L2, L1 and shared memory), % of peak"),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",
                               "achieved occupancy: active warps, % of the SM's maximum"),
    "registers": ("launch__registers_per_thread", "registers per thread"),
    "shared_static_bytes": ("launch__shared_mem_per_block_static", "static shared memory per block"),
    "shared_dynamic_bytes": ("launch__shared_mem_per_block_dynamic", "dynamic shared memory per block"),
    "block_size": ("launch__block_size", "threads per block"),
    "grid_size": ("launch__grid_size", "blocks in the grid"),
    "ipc": ("sm__inst_issued.avg.per_cycle_active", "instructions issued per active cycle, per SM"),
    "instructions": ("sm__inst_executed.sum", "warp instructions executed"),
    "fma_pipe_instructions": ("sm__inst_executed_pipe_fma.sum", "warp instructions on the FMA pipe (FFMA and kin)"),
    "hmma_instructions": ("sm__inst_executed_pipe_tensor_op_hmma.sum", "tensor-core HMMA warp instructions"),
    "gmma_instructions": ("sm__inst_executed_pipe_tensor_op_gmma.sum", "tensor-core warpgroup (HGMMA) instructions"),
    "lds_instructions": ("sm__sass_inst_executed_op_shared_ld.sum", "shared-memory load (LDS) warp instructions"),
    "lds_bytes": ("sm__sass_data_bytes_mem_shared_op_ld.sum", "bytes those LDS read"),
    "ldsm_instructions": ("sm__sass_inst_executed_op_ldsm.sum", "LDSM (matrix loads from shared) warp instructions"),
    "ldg_instructions": ("sm__sass_inst_executed_op_global_ld.sum", "global load (LDG) warp instructions"),
    "ldg_bytes": ("l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum", "bytes those LDG moved through L1"),
    "bank_conflicts_ld": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                          "shared-memory bank conflicts of loads"),
    "bank_conflicts_st": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
                          "shared-memory bank conflicts of stores"),
    "dram_read_bytes": ("dram__bytes_read.sum", "bytes read from DRAM"),
    "dram_write_bytes": ("dram__bytes_write.sum", "bytes written to DRAM"),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct", "L2 hit rate, % of sectors"),
}
# warp-stall reasons: warps stalled on each per issued instruction, as shares of all stalls in the table
STALLS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "gmma", "imc_miss", "lg_throttle",
          "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected",
          "short_scoreboard", "sleeping", "tex_throttle", "wait")
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
NANOSECONDS = {"duration_s"}  # reported in ns (--print-units base), kept in seconds


def metric_names() -> list[str]:
    return [metric for metric, _ in METRICS.values()] + [STALL_METRIC.format(reason) for reason in STALLS]


def command(ncu: str, log_file: str) -> list[str]:
    """The profiler's command line, before the worker's: the counters of what runs between cudaProfilerStart and
    cudaProfilerStop, in every process of the tree, as raw CSV in base units into `log_file`."""
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
            "--metrics", ",".join(metric_names()), "--csv", "--page", "raw", "--print-units", "base",
            "--log-file", log_file]


RESTRICTED = "ERR_NVGPUCTRPERM"  # ncu's word for performance counters not permitted to this user


def _number(text: str) -> float | None:
    """A raw-page value: '1,234.5' -> 1234.5; an instanced metric's 'total (a; b)' -> its total; 'n/a' -> None."""
    text = text.split(" (", 1)[0].replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return None


def parse(text: str) -> list[dict]:
    """One record per profiled kernel of ncu's raw CSV page (`command`'s log, which also holds ncu's own ==PROF==
    lines): its name, every METRICS column, each stall reason's share of the stalls and the top one (not counting
    not_selected: a warp that could issue while another did), and the
    derived widths (bytes a warp's LDS or LDG instruction moved, on average: a broadcast counts once)."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows or rows[0][:1] != ["ID"]:
        return []
    header, records = rows[0], []
    for values in rows[2:]:  # the second row gives the units
        raw = dict(zip(header, values))
        record = {"kernel": re.sub(r"\s+", " ", raw.get("Kernel Name", "")).strip()}
        for column, (metric, _) in METRICS.items():
            value = _number(raw.get(metric, ""))
            record[column] = value * 1e-9 if value is not None and column in NANOSECONDS else value
        stalls = {reason: _number(raw.get(STALL_METRIC.format(reason), "")) or 0.0 for reason in STALLS}
        total = sum(stalls.values())
        for reason, value in stalls.items():
            record[f"stall_{reason}"] = value / total if total else None
        stalled = {reason: value for reason, value in stalls.items() if reason != "not_selected"}  # another warp issued
        record["top_stall"] = max(stalled, key=stalled.get) if any(stalled.values()) else None
        record["lds_bytes_per_instruction"] = _ratio(record["lds_bytes"], record["lds_instructions"])
        record["ldg_bytes_per_instruction"] = _ratio(record["ldg_bytes"], record["ldg_instructions"])
        records.append(record)
    return records


def _ratio(numerator, denominator, per: float = 1.0) -> float | None:
    return numerator / (denominator * per) if numerator is not None and denominator else None
