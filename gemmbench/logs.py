"""Logging for stage jobs: progress to the terminal and to the job's Snakemake log file."""
from __future__ import annotations

import logging
import os
import sys


def setup(log_path: str | None = None) -> logging.Logger:
    logger = logging.getLogger("gemmbench")
    logger.setLevel(logging.INFO)
    logger.handlers.clear()
    logger.propagate = False
    fmt = logging.Formatter("%(asctime)s gemmbench: %(message)s", "%H:%M:%S")
    for handler in [logging.StreamHandler(sys.stderr)] + ([logging.FileHandler(log_path)] if log_path else []):
        handler.setFormatter(fmt)
        logger.addHandler(handler)
    return logger


def job_started(key: str, mode: str) -> None:
    """Log how long this job's process ran before its stage began: a job on the GPU's path holds the GPU from its
    start."""
    process_s = process_age_s()
    if process_s is not None:
        logging.getLogger("gemmbench").info("%s %s: the job's process started %.2f s before the stage (interpreter, "
                                            "imports)", key, mode, process_s)


def process_age_s() -> float | None:
    """Seconds since this process started (Linux; None elsewhere): for a job's process, what its interpreter
    and imports (and a script job's Snakemake preamble) took before the stage began."""
    try:
        started = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        return float(open("/proc/uptime").read().split()[0]) - started
    except (OSError, ValueError, IndexError):
        return None
