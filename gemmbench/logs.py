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


def process_age_s() -> float | None:
    """Seconds since this process started (Linux; None elsewhere): for a job's process, what its interpreter
    and imports (and a script job's Snakemake preamble) took before the stage began."""
    try:
        started = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        return float(open("/proc/uptime").read().split()[0]) - started
    except (OSError, ValueError, IndexError):
        return None
