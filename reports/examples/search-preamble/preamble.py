"""Each search's time before it searched, from its tune log (the process's age, then the toolchain with the record's
key and lookup, then the GPU's facts with the transfer's lookup), and its job's wall (Snakemake's benchmark file),
for each results/ folder named."""
import re
import sys
from pathlib import Path

import pandas as pd

STAMPS = re.compile(r"process started ([\d.]+) s.*?lookup took ([\d.]+) s, the GPU's facts and the transfer's "
                    r"lookup ([\d.]+) s", re.S)

for results in map(Path, sys.argv[1:]):
    rows = []
    for log in sorted(results.glob("logs/tune/*/*/*/*.log")):
        found = STAMPS.search(log.read_text())
        if not found:
            continue
        job = "/".join(log.with_suffix("").parts[-3:])
        bench = next(results.glob(f"benchmarks/tune/*/{job}.tsv"))
        process_s, keyed_s, facts_s = map(float, found.groups())
        rows.append({"job": job, "process_s": process_s, "key_s": keyed_s, "facts_s": facts_s,
                     "before_search_s": round(process_s + keyed_s + facts_s, 2),
                     "job_wall_s": pd.read_csv(bench, sep="\t")["s"].iloc[0]})
    table = pd.DataFrame(rows)
    print(results)
    print(table.to_string(index=False))
    print(table.drop(columns="job").sum().round(2).to_string(), "\n")
