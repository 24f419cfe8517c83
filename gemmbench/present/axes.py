"""Small pieces the figures and the report's tables share: the modes in reading order, the families with the baseline's
first, the ladders' rows, a placeholder figure, a log2 size axis. Nothing here imports matplotlib until it draws: the
report, which draws nothing, imports this and not plots.py."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from kernels.registry import MODES

if TYPE_CHECKING:  # drawing imports matplotlib; the workflow reads the views when it plans, which draws nothing
    import matplotlib.pyplot as plt

MODE_ORDER = list(MODES)


def modes_in(df: pd.DataFrame) -> list[str]:
    present = set(df["mode"])
    return [m for m in MODE_ORDER if m in present] + sorted(present - set(MODE_ORDER))


def several_models(df: pd.DataFrame) -> pd.Series:
    """Rows of a device kind (cuda, cpu) that ran on more than one model here: their labels name the model."""
    return df.groupby("device")["gpu"].transform("nunique") > 1


def baseline_first(df: pd.DataFrame) -> list[str]:
    """The families of `df`, the baseline's (role "baseline") first."""
    baseline = set(df.loc[df["role"] == "baseline", "family"]) if "role" in df else set()
    return sorted(df["family"].unique(), key=lambda family: (family not in baseline, family))


def ladder_rows(ok: pd.DataFrame) -> pd.DataFrame:
    """Benchmarked (sweep) points of the families with several variants (their ladders), with a % of cuBLAS."""
    if ok.empty:
        return ok
    from gemmbench.present import views

    laddered = [name for name, view in views.VIEWS.items() if "ladder" in view.figures]
    ok = ok[(ok["role"] != "baseline") & ok["workload"].isin(laddered)].dropna(subset=["pct_of_baseline"])
    several = ok.groupby("family")["variant"].nunique()
    return ok[ok["family"].isin(several[several > 1].index)]


def placeholder(title: str, text: str) -> plt.Figure:
    import matplotlib.pyplot as plt

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
    from matplotlib import ticker

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


NOTE_WORDS = ("below the axis", "above the axis", "outside", "no ", "not ")  # a panel's note that accounts for points


def _marked(ax: plt.Axes) -> np.ndarray:
    """The (x, y) of a panel's data markers: scatter points, and the vertices of lines drawn with markers (a line
    without markers, such as a roofline's ceiling, may run past the axes by design)."""
    points = [line.get_xydata() for line in ax.get_lines()
              if line.get_transform() == ax.transData and line.get_marker() not in (None, "None", "", " ")]
    points += [c.get_offsets() for c in ax.collections if c.get_offset_transform() == ax.transData]
    xy = np.concatenate([np.asarray(p, dtype=float).reshape(-1, 2) for p in points] or [np.empty((0, 2))])
    return xy[np.isfinite(xy).all(axis=1)]


def figure_problems(fig: plt.Figure) -> list[str]:
    """What a reader would miss or misread in a drawn figure: a panel with no data and no note saying why, data
    markers outside a panel's axes that no note counts, and texts (titles, notes) that overlap."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = []
    for ax in fig.axes:
        if not ax.axison or not ax.get_visible():
            continue
        name = ax.get_title(loc="left") or ax.get_title() or ax.get_ylabel() or "a panel"
        xy = _marked(ax)
        drawn = len(xy) + sum(1 for line in ax.get_lines() if line.get_transform() == ax.transData) + \
            sum(1 for patch in ax.patches if patch.get_height())
        notes = " ".join(text.get_text() for text in ax.texts).lower()
        accounted = any(word in notes for word in NOTE_WORDS)
        if not drawn and not accounted:
            found.append(f"{name}: an empty panel and no note saying why")
        (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        outside = int(((xy[:, 0] < x0) | (xy[:, 0] > x1) | (xy[:, 1] < y0) | (xy[:, 1] > y1)).sum())
        if outside and not accounted:
            found.append(f"{name}: {outside} point(s) outside the axes and no note counting them")
    texts = [t for ax in fig.axes for t in (ax.title, ax._left_title, ax._right_title, *ax.texts)]
    texts = list({id(t): t for t in [*texts, *fig.texts, *([fig._suptitle] if fig._suptitle else [])]}.values())
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_visible() and t.get_text().strip()]
    for i, (text, box) in enumerate(boxes):
        for other, other_box in boxes[i + 1:]:
            if box.overlaps(other_box):
                found.append(f"texts overlap: {text!r} and {other!r}")
    return found
