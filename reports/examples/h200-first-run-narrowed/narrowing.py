"""Would a search that times, at a class, only the fastest candidates of the class below pick what the full search
picked? Asked of every committed search (resources/tuning/*/), in its own timing, with no GPU:
`python reports/examples/h200-first-run-narrowed/narrowing.py` from the project's root."""
import collections
import glob
import json


def searches():
    for path in sorted(glob.glob("resources/tuning/*/**/*.json", recursive=True)):
        record = json.load(open(path))
        if path.endswith("gpu.json") or not record.get("trials"):
            continue
        timed = collections.defaultdict(dict)
        for trial in record["trials"]:
            if trial["status"] == "ok":
                timed[trial["size"]][json.dumps(trial["params"], sort_keys=True)] = trial["median_s"]
        yield path.removeprefix("resources/tuning/"), timed


def loss(timed, size, below, keep):
    """How much slower than the full search's fastest at `size` the fastest of `below`'s `keep` fastest is there."""
    finalists = sorted(timed[below], key=timed[below].get)[:keep]
    fastest = min(timed[size].values())
    return min((timed[size][p] for p in finalists if p in timed[size]), default=float("inf")) / fastest - 1


for size, below in ((8192, 4096), (4096, 1024)):
    print(f"class {size} narrowed to the fastest at {below}:")
    for keep in (2, 4, 6, 8, 12):
        losses = sorted(((loss(timed, size, below, keep), name) for name, timed in searches()
                         if size in timed and below in timed), reverse=True)
        over = [f"{name} {100 * lost:+.1f}%" for lost, name in losses if lost > 0.02]
        print(f"  {keep:2d} kept: {len(losses)} searches, {sum(lost == 0 for lost, _ in losses)} pick the same, "
              f"{len(over)} over 2% slower; worst {100 * losses[0][0]:+.1f}% ({losses[0][1]})")
