"""Median wall time of each rule's jobs in finished results folders, side by side (Snakemake's ``benchmark:`` files).

    python perf/job_times.py RESULTS [RESULTS ...]

Prints one row per rule: its job count and, for each folder, the median, min and max seconds of its jobs, and
the sum over its jobs. The aggregate folder holds three rules (``summary``, ``table_*``, the figures), split here.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import pandas as pd


def rule_of(path: Path) -> str:
    """The rule a benchmark file belongs to (its folder, or for the aggregate folder its name's kind)."""
    if path.parent.name != "aggregate":
        return path.parent.name
    return "summary" if path.stem == "summary" else "table" if path.stem.startswith("table_") else "figure"


def job_seconds(results: Path) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for path in sorted((results / "benchmarks").glob("*/*.tsv")):
        out.setdefault(rule_of(path), []).append(float(pd.read_csv(path, sep="\t")["s"].iloc[-1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", type=Path)
    a = ap.parse_args()
    tables = [job_seconds(r) for r in a.results]
    print(f"{'rule':16s}" + "".join(f"| {str(r)[-38:]:>38s} " for r in a.results))
    print(f"{'':16s}" + "| jobs  median    min    max     sum " * len(a.results))
    for rule in sorted(set().union(*tables)):
        row = f"{rule:16s}"
        for t in tables:
            s = t.get(rule, [])
            row += (f"| {len(s):4d} {statistics.median(s):7.2f} {min(s):6.2f} {max(s):6.2f} {sum(s):7.1f} " if s
                    else f"| {'-':>4s} {'':7s} {'':6s} {'':6s} {'':7s} ")
        print(row)
    print(f"{'all jobs':16s}" + "".join(f"| {sum(map(len, t.values())):4d} {'':22s}{sum(map(sum, t.values())):7.1f} "
                                       for t in tables))


if __name__ == "__main__":
    main()
