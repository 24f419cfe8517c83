"""The import graph of gemmbench/, kernels/ and workflow/scripts/ as a picture: one box per package (or top-level
module) on its floor, one arrow per package pair that imports (red where it points up a floor).

  python reports/examples/layout/imports.py OUT_PREFIX    -> OUT_PREFIX.png, OUT_PREFIX.svg, OUT_PREFIX.txt
The graph is tests/test_layout.py's, which the tests check for cycles and upward imports."""
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from test_layout import FLOORS, cycles, import_graph, modules  # noqa: E402


def group(name: str) -> str:
    parts = name.split(".")
    if parts[0] == "workflow":
        return "workflow.scripts"
    return ".".join(parts[:2]) if len(parts) > 1 and (ROOT / parts[0] / parts[1]).is_dir() else name


def main(prefix: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    graph, paths = import_graph(), modules()
    lines = {m: len(p.read_text().splitlines()) for m, p in paths.items()}
    up = [(a, b) for a, ts in graph.items() for b in ts if FLOORS[b.split(".")[0]] < FLOORS[a.split(".")[0]]]
    text = [f"modules: {len(graph)}, imports: {sum(map(len, graph.values()))}", f"cycles: {cycles(graph) or 'none'}",
            f"upward imports: {up or 'none'}", "largest harness modules: " + ", ".join(
                f"{m} {n}" for m, n in sorted(lines.items(), key=lambda x: -x[1]) if m.startswith("gemmbench"))[:200],
            "", *(f"{m} ({lines[m]} lines) -> {', '.join(sorted(graph[m])) or '-'}" for m in sorted(graph))]
    Path(prefix + ".txt").write_text("\n".join(text) + "\n")
    pairs, count, size = defaultdict(int), defaultdict(int), defaultdict(int)
    for a, targets in graph.items():
        count[group(a)] += 1
        size[group(a)] += lines[a]
        for b in targets:
            if group(a) != group(b):
                pairs[(group(a), group(b))] += 1
    floors = defaultdict(list)
    for g in sorted(count):
        floors[FLOORS[g.split(".")[0]]].append(g)
    width = max(map(len, floors.values()))
    pos = {g: ((j + 0.5) * width / len(names), -f * 3 - (j % 2) * 0.9)
           for f, names in floors.items() for j, g in enumerate(names)}
    fig, ax = plt.subplots(figsize=(2.0 * width, 9))
    for (a, b), n in pairs.items():
        (x0, y0), (x1, y1) = pos[a], pos[b]
        red = FLOORS[b.split(".")[0]] < FLOORS[a.split(".")[0]]
        ax.annotate("", xy=(x1, y1 + 0.25), xytext=(x0, y0 - 0.25), arrowprops=dict(
            arrowstyle="->", color="red" if red else "#8899aa", lw=0.5 + 0.3 * min(n, 6), alpha=0.6,
            connectionstyle="arc3,rad=0.08"))
    colours = {0: "#e8f0ff", 1: "#eaf7ea", 2: "#fff3e0"}
    for g, (x, y) in pos.items():
        label = g.replace("gemmbench.", "").replace("kernels.", "kernels/") + f"\n{count[g]} mod, {size[g]} lines"
        ax.text(x, y, label, ha="center", va="center", fontsize=8,
                bbox=dict(boxstyle="round", fc=colours[FLOORS[g.split('.')[0]]]))
    for f, title in ((0, "workflow (Snakemake scripts)"), (1, "gemmbench (the harness)"), (2, "kernels (the families)")):
        ax.text(-0.6, -f * 3, title, rotation=90, va="center", fontsize=10, weight="bold")
    ax.set_xlim(-1, width + 0.2)
    ax.set_ylim(-7.6, 1)
    ax.axis("off")
    ax.set_title(f"import graph: {len(graph)} modules; cycles: {len(cycles(graph))}; upward imports: {len(up)}")
    fig.tight_layout()
    fig.savefig(prefix + ".svg")
    fig.savefig(prefix + ".png", dpi=80)
    print("\n".join(text[:4]))


main(sys.argv[1])
