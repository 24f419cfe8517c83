"""Small pieces every figure uses: the modes in reading order, a placeholder figure, a log2 size axis."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib import ticker

from kernels.registry import MODES

MODE_ORDER = list(MODES)


def modes_in(df: pd.DataFrame) -> list[str]:
    present = set(df["mode"])
    return [m for m in MODE_ORDER if m in present] + sorted(present - set(MODE_ORDER))


def placeholder(title: str, text: str) -> plt.Figure:
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.axis("off")
    ax.set_title(title)
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=12)
    return fig


MAX_SIZE_LABELS = 7  # more labels than this on a size axis run into each other


def _size_label(size: int) -> str:
    return f"{size // 1024}k" if size >= 1024 else str(size)


def log2_size_axis(ax: plt.Axes, sizes: pd.Series) -> None:
    """Log2 x axis ticked at powers of two (every second or fourth one where there are many), labelled as sizes
    (256, 512, 1k, ... 16k)."""
    low, high = math.floor(math.log2(sizes.min())), math.ceil(math.log2(sizes.max()))
    step = math.ceil((high - low + 1) / MAX_SIZE_LABELS)
    ticks = [2 ** e for e in range(high, low - 1, -step)][::-1]
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, labels=[_size_label(t) for t in ticks])
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())


def readable(value: float) -> str:
    """Three significant figures, as people write them: 1,070 rather than 1.07e+03 (a bf16 peak), 67.1, 0.489."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def flagged(value) -> bool:
    """A boolean cell of a table: empty (None, NaN, NA) counts as not set."""
    return False if value is None or pd.isna(value) else bool(value)


def throttled(r) -> str:
    """Why the clocks were pulled down during a point (its slowdown reasons), or "" where they were not."""
    if not flagged(getattr(r, "throttled", None)):
        return ""
    reasons = getattr(r, "throttle_reasons", None)
    return reasons if isinstance(reasons, str) and reasons else "clock dropped"
