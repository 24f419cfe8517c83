"""Best rung per family and mode at 4096, 8192 and 16384: same-run % of cuBLAS (pct_of_baseline), the rung in
brackets, for each summary.csv named (this run's first)."""
import sys

import pandas as pd


def best(path: str) -> pd.DataFrame:
    rows = pd.read_csv(path)
    rows = rows[(rows.workload == "gemm") & (rows.status == "ok") & rows.m.isin([4096, 8192, 16384])
                & (rows.m == rows.n) & (rows.n == rows.k) & ~rows.family.isin(["cublas", "cpu"])]
    top = rows.loc[rows.groupby(["mode", "family", "m"]).pct_of_baseline.idxmax()]
    rung = top.variant.str.split("_").str[0]
    return top.assign(best=top.pct_of_baseline.round(1).astype(str) + " (" + rung + ")").pivot(
        index=["mode", "family"], columns="m", values="best")


for path in sys.argv[1:]:
    print(path)
    print(best(path).to_string())
    print()
