"""Run in a copy of the tree with the first run's results/ (and the committed records in resources/).
compare.csv (compare_picks.py) against the first run's records: each class whose pick differs from the committed
record's, the first run's pick over the committed pick's time (mean of the two rounds' medians), and why they
differ where the first run says (a serving check refused the committed pick: its worst share where the class serves)."""
import glob
import json

import pandas as pd


def ident(params):
    return json.dumps(params, sort_keys=True)


records = {path.split("nvidia-h200/")[1][:-5]: json.load(open(path))
           for path in glob.glob("results/tune/nvidia-h200/*/*/*.json") if path.count(".") == 1}
committed_records = {job: json.load(open(f"resources/tuning/nvidia-h200/{job}.json")) for job in records
                     if glob.os.path.exists(f"resources/tuning/nvidia-h200/{job}.json")}
committed = committed_records
same = sum(c["params"] == committed[job]["classes"][size]["params"] for job in committed
           for size, c in records[job]["classes"].items() if size in committed[job]["classes"])
comparable = sum(size in committed[job]["classes"] for job in committed for size in records[job]["classes"])
timed = pd.read_csv("compare.csv")
assert (timed.status == "ok").all()
table = timed.groupby(["job", "size", "which"]).median_s.mean().unstack()
table["first_over_committed_pct"] = 100 * (table["first"] / table["committed"] - 1)
why = []
for job, size in table.index:
    c = records[job]["classes"][str(size)]
    rows = timed[(timed.job == job) & (timed["size"] == size) & (timed.which == "committed")]
    committed = json.loads(rows.params.iloc[0])
    if c.get("refused") and ident(c["refused"]["params"]) == ident(committed):
        why.append(f"the committed pick, refused by a serving check: {100 * c['refused']['share']:.0f}% of the "
                   f"fastest at {c['refused']['worst_shape']}")
    elif (old := committed_records[job]["classes"][str(size)].get("refused")) and ident(old["params"]) == ident(
            c["params"]):
        why.append(f"this pick, refused by the committed search's check: {100 * old['share']:.0f}% at "
                   f"{old['worst_shape']}")
    elif ident(committed) not in {ident(t["params"]) for t in records[job]["trials"] if t["size"] == size}:
        why.append("the committed pick is not among this search's candidates")
    else:
        why.append("")
table["why"] = why
pd.set_option("display.width", 200)
print(f"{len(records)} searches; {comparable} of their classes have a committed record (a full search on another "
      f"H200): {same} picked the same parameters, {len(table)} others, both picks timed again in this sitting "
      f"(two rounds, opposite order; seconds):\n")
print(table.sort_values("first_over_committed_pct").round({"first": 6, "committed": 6,
                                                          "first_over_committed_pct": 2}).to_string())
within = table.first_over_committed_pct <= 2
print(f"\nwithin 2% of (or faster than) the committed pick: {within.sum()} of {len(table)}; faster by over 2%: "
      f"{(table.first_over_committed_pct < -2).sum()}; beyond 2%: {(~within).sum()}, of which refused by a serving "
      f"check: {(~within & table.why.str.contains('refused')).sum()}")
