"""How the numbers were made, in words: the report's methodology section, for the devices a run used."""
from __future__ import annotations

from gemmbench import workloads
from gemmbench.measure import checking
from gemmbench.measure.devices import EXPONENT_RANGE
from gemmbench.measure.timing import BATCH_TARGET_S, SETTLE_CLOCK_REL, SETTLE_MAX_S, SETTLE_WINDOW_S
from gemmbench.present.tables import SLOW

# with capped_span_s, a warm-up that saw no slowdown is not extended by settling windows (timing.settle)
UNSLOWED_WARM_UP = ", and wherever they saw no slowdown: one that begins later is sampled across, below"


def methodology(config: dict, devices: list[dict]) -> dict:
    """How the numbers were made, in words, for the devices this run used (a CPU-only run gets no CUDA entries)."""
    timing, gpu = config["timing"], any(d.get("device") == "cuda" for d in devices)
    entries = {
        "FLOPs": "; ".join(f"{name}: {workloads.get(name).formula}" for name in config["workloads"])
                 + " (float32 storage, bf16 operands in the bf16 mode)",
        "Device time": ("CUDA events around one launch queued behind a spinning kernel (as nvbench does), so the "
                        "host's launch overhead is excluded; CPU variants: wall time per call") if gpu else
                       "wall time per call (a CPU run: no device timer)",
        "Host time": "median wall time of one call including launch and synchronisation, over the warm-up "
                     "launches after the first",
        "Batched time": f"on a GPU, a kernel under {BATCH_TARGET_S * 1e6:.0f} µs with a hot cache is timed per launch "
                        f"over as many launches in a row (between one pair of events) as span "
                        f"{BATCH_TARGET_S * 1e6:.0f} µs, each launch on its own inputs and output: one launch per "
                        f"event pair would also time the gap the events leave. Its median (median_s, which every "
                        f"figure and ratio uses; batched_median_s) comes from those samples; its first "
                        f"{timing['min_samples']} one-launch samples only size the batch (single_median_s). On a CPU, "
                        f"whose timer is the call itself, one call's median stands, the batched one beside it",
        "Sampling": f"at least {timing['warmup_runs']} warm-up launches per point (its validation's launches right "
                    f"before it count: they paid the one-time costs and kept the device busy), and the device kept "
                    f"busy for {timing['warmup_s']} s before sampling (clocks settle under load; one worker runs a "
                    f"variant's points back to back, so only its first point waits that long; a GPU kernel under "
                    f"{BATCH_TARGET_S * 1e6:.0f} µs, launched one at a time, idles the GPU and waits none); on a "
                    f"GPU the warm-up goes on, in "
                    f"{SETTLE_WINDOW_S} s windows (the warm-up's own launches count as the first where they span one"
                    f"{UNSLOWED_WARM_UP if timing.get('capped_span_s') else ''}), "
                    f"while a power or thermal slowdown is still lowering "
                    f"the clock under this kernel's own load (until two windows' mean clocks agree within "
                    f"{SETTLE_CLOCK_REL:.0%}, at most {SETTLE_MAX_S} s; settle_s), "
                    f"then samples until the 95% "
                    f"confidence half-width of the median (never below half the timer's step) is below "
                    f"{timing['rel_precision']:.2%} of it from at least {timing['min_samples']} samples (converged) "
                    f"and "
                    f"they add up to {timing['min_time_s']} s, or until {timing['max_samples']} samples or the "
                    f"{timing['budget_s']} s budget per point (stopped_by; thin_median: the budget left fewer than "
                    f"{timing['min_samples']}); while the GPU is held down by power or heat, neither precision nor "
                    f"the sample count ends it before it spans {timing.get('capped_span_s', 0)} s (a power-capped "
                    f"clock dips for a tenth of a second or more about once a second, which moves a shorter window's "
                    f"median by several percent)",
        "Spread": "beside each number, how much one launch varies: the interquartile range of its samples relative "
                  "to their median (iqr_rel), which a few slow samples cannot decide, and how many samples took over "
                  f"{SLOW:g} times the median (slow_samples), named, not averaged in. Their known cause, another "
                  "process making or destroying a CUDA context on the GPU while it times (a build's worker beside the "
                  "measuring job), is kept out: a point is timed while its GPU's quiet lock keeps them waiting "
                  "(quiet_wait_s: how long the point waited for them). The relative standard deviation (noise, as "
                  "nvbench reports it) stays in the tables. Two runs of one GPU differ by more (the "
                  "comparison with a reference run shows that band); the median's 95% confidence interval "
                  "(median_ci_rel in the tables) only decides when sampling stops",
        "Cache": f"{config['cache']} (cold: the last-level cache flushed before every sample, outside the timed "
                 f"region)",
        "What was timed": "every timed launch is accounted for on content it has never seen, outside the timed "
                          "region: before each sample its inputs get fresh random content from keys the variant "
                          "cannot see (drawn from the operating system's entropy), A·(B·x) is computed in fp64 for "
                          "x of random signs, and the output is poisoned with NaN; after it C·x is compared with it "
                          "(Freivalds' test, O(n²)): every row within the mode's error bound, and the projected "
                          "relative error too. Nothing a variant can keep between launches (a product kept by "
                          "address, by content, by sign or scale) is the product of inputs it has not seen, and "
                          "work skipped or left for later leaves NaN or a wrong row. Two samples drawn at random "
                          "(reservoir sampling) are compared in full with the fp64 reference of their own inputs, "
                          "made again from their keys, and the guard bands must hold; batched samples give every "
                          "launch its own fresh inputs and poisoned output, tested alike; launches through the same "
                          "timed path follow until the point has 64 tested launches, for at most 0.5 s and no "
                          "longer than its sampling took. A point is refused if a tracing or profiling hook is "
                          "installed, the interpreter's switch interval or timer changed, or a new thread appeared "
                          "while it was timed; on a CPU, if a drawn output element was still unwritten when the "
                          "timer stopped, or its timed median is far below the host's fastest call (its warm-up's, "
                          "and of calls timed again after its samples, each far slower than a call timed as a sample "
                          "just before it); a variant "
                          "whose work does not run on the harness's stream, or is unfinished when that stream's "
                          "work is done, is not timed. A variant that leaves a thread or device work running after "
                          "its point, or writes the harness's fp64 references (kept with keyed digests, checked "
                          "before each use), fails, and a resident worker that a variant left otherwise than a "
                          "fresh one is replaced before the next. Every reported time "
                          "(median, fastest sample, batched) above "
                          "the device's peak, or beyond its memory for operands its L2 cannot hold, is refused; a "
                          "device with no known peak is marked unchecked (timing_gate). A point that failed in an "
                          "earlier run keeps that history (failures_before). What this costs per point: "
                          "sampling_overhead_s and check_s in the bench records",
        "Clocks": "NVML read after warm-up, every 10 ms while sampling and after it: the SM clock's mean and minimum "
                  "over the window, temperature, power and slowdown reasons; a point with a power or thermal "
                  "slowdown or a clock drop over 5% is flagged as throttled",
        "Peak": "SM count × max SM clock × FLOP per clock per SM for the mode (FP32 FFMA, or dense TF32 tensor cores); "
                "pct_of_peak_at_clock uses the window's mean SM clock instead. A CPU's peak, which only gates its "
                "times, is bounded by logical cores × FP32 lanes of its widest vector unit × 2 FMA pipes × 2 × its "
                "highest clock (cpufreq's maximum, else 6.5 GHz)",
        "% of cuBLAS": "cuBLAS median time / variant median time, same run, GPU model, shape and mode "
                       "(CPU variants: the cuBLAS of their host; b2b: two cuBLAS calls, cublas/b2b_unfused), with "
                       "its 95% interval (pct_of_baseline_ci, ± points): the two medians' confidence half-widths "
                       "added in quadrature. It says how well one run pins the ratio; two runs differ by more (see the "
                       "comparison with a reference run)",
        "Validation": f"inputs uniform in [-1, 1) from seed ({config['seed']}, shape), the first operand's rows "
                      f"and the last one's columns scaled by powers of two from 2^-{EXPONENT_RANGE} to "
                      f"2^{EXPONENT_RANGE}; output poisoned with NaN inside NaN guard bands; two launches; "
                      f"fp64 reference (on the GPU for GPU variants); pass if every output is written, nothing "
                      f"outside it, and the errors are those of the mode's arithmetic: the honest error of an "
                      f"element relative to its scale (the root-sum-square of its products) is one unit, 2^-24 × "
                      f"(2 + √k) in fp32 (round to nearest), 2 × 2^-11 + 2^-24 × (2 + k/8) in tf32 and 2^-24 × "
                      f"(2 + k/8) in bf16 (tensor cores truncate as they accumulate), k the reduction length; "
                      f"‖C−R‖/‖R‖ must stay within {checking.RMS_UNITS:g} units and every element within "
                      f"{checking.MAX_UNITS:g} units of its scale (error_units, max_error_units in the tables); a "
                      f"tuned variant also at an off-tile shape per size class",
        "Watchdog": f"each point runs in a supervised worker process, killed after {timing['point_timeout_s']} s",
        "Provenance": "every row names the digest of the sources that ran (source_digest: the harness and the files "
                      "that determine its variant), the git commit (and whether the tree was edited), the driver and "
                      "the toolchain (Python, the kernel libraries, cuBLAS, NVRTC, NVVM, nvcc, the CUDA toolkit) of "
                      "the worker that measured it; a new driver or toolchain rebuilds, re-validates and re-measures",
    }
    if not gpu:
        for name in ("Clocks", "% of cuBLAS"):
            entries.pop(name)
    return entries
