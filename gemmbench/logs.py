"""Logging for stage jobs: progress to the terminal and to the job's Snakemake log file."""
from __future__ import annotations

import logging
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
