"""The cost of a no-op re-run (every output up to date) in two checkouts, side by side on one results folder.

    python perf/noop_rerun.py --results DIR --baseline OTHER_CHECKOUT [--runs 5] [-- SNAKEMAKE ARGS]

Runs ``snakemake`` (this checkout's, then the baseline's, alternately) on DIR, which must be complete for both, and
prints each one's wall seconds (median, min, max) and the median of the pairwise differences: what this checkout adds
to "Nothing to be done" (the provenance records: settings of every job and digests of the files they read).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(checkout: Path, results: str, extra: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(checkout / "workflow"))
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--config", f"results={results}", *extra],
                         cwd=checkout, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if "Nothing to be done" not in out.stdout + out.stderr:
        raise SystemExit(f"{checkout}: not a no-op on {results}:\n{(out.stdout + out.stderr)[-2000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", required=True)
    ap.add_argument("--baseline", required=True, type=Path)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    run(ROOT, a.results, a.extra), run(a.baseline, a.results, a.extra)  # warm-up: file cache, records written
    here, base = [], []
    for _ in range(a.runs):
        here.append(run(ROOT, a.results, a.extra))
        base.append(run(a.baseline, a.results, a.extra))
    for name, t in (("this checkout", here), (f"baseline {a.baseline}", base)):
        print(f"{name:40s} median {statistics.median(t):6.2f} s   min {min(t):6.2f}   max {max(t):6.2f}")
    print(f"{'added by this checkout (pairwise median)':40s} {statistics.median(h - b for h, b in zip(here, base)):+6.2f} s")


if __name__ == "__main__":
    main()
