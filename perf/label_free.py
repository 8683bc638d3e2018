"""How well label-free and proxy difficulty rank the embedded pool, against an independent gold reference, as K grows.

    .venv/bin/python perf/label_free.py --proxy results-label-free/models/tiny-weak

The reference is perf/adaptive_scoring.py's: K=64 graded samples per pool item from the embedded default's model
(seed 101, cached under RESULTS/perf/; this script draws it if absent). Every source here comes from other samples:
one K=32 draw (seed 0) of the same model and, with --proxy, one of the proxy model; the first K of each draw give the
rows for K = 4, 8, 16, 32. Per source and K: Spearman ρ with the reference pass rate (a 95% bootstrap interval over
items), and the overlap of its hard/medium/easy/learnable 10% subsets with the reference's. The label row (the same
model's own pass rate from K samples) is the ceiling an estimate from K samples reaches: agreement with the same K
cannot rank better than the gold it stands in for.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from adaptive_scoring import embedded, reference  # noqa: E402  (perf/, beside this script)

from grpo_budget.aggregate import calibration
from grpo_budget.config.settings import Generation  # noqa: E402
from grpo_budget.generation.backends import from_settings
from grpo_budget.generation.sampling import Sampling  # noqa: E402
from grpo_budget.generation.sample import sample_and_grade
from grpo_budget.score import agreement
from grpo_budget.select import sources  # noqa: E402
from grpo_budget.select.policies import difficulty, select  # noqa: E402
from grpo_budget.select.posterior import with_posterior

POLICIES = ("hard", "medium", "easy", "learnable")


def draw(model: str, pool: pd.DataFrame, dataset: dict, g: Generation, k: int, seed: int) -> pd.DataFrame:
    t0 = time.perf_counter()
    out = sample_and_grade(from_settings(model, g), pool, dataset, replace(Sampling.of(g), n=k, seed=seed))
    print(f"  drew K={k} from {model} in {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def first_k(graded: pd.DataFrame, k: int) -> pd.DataFrame:
    """The score table of the first ``k`` samples of each item (counts, posterior, agreement)."""
    answers = graded["answers"].map(lambda a: list(a)[:k])
    correct = graded["correct"].map(lambda c: list(c)[:k])
    t = pd.DataFrame({"id": graded["id"], "answers": answers, "correct": correct, "n_samples": k,
                      "n_correct": correct.map(sum).astype(int)})
    t["pass_rate"] = t["n_correct"] / k
    return with_posterior(pd.concat([t, agreement.agreement_columns(answers)], axis=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results", help="the embedded default's results folder (model, pool)")
    ap.add_argument("--config", default="config.yaml")
    ap.add_argument("--proxy", help="a proxy model folder (e.g. results-label-free/models/tiny-weak)")
    ap.add_argument("--ks", default="4,8,16,32")
    ap.add_argument("--ref-k", type=int, default=64)
    ap.add_argument("--ref-seed", type=int, default=101)
    ap.add_argument("--budget", type=float, default=0.1)
    ap.add_argument("--n-boot", type=int, default=500)
    a = ap.parse_args()

    e = embedded(a.results, a.config)
    pool, dataset, g, G, model = e.pool, e.dataset, e.g, e.G, e.model
    ks = [int(k) for k in a.ks.split(",")]
    ref, cache = reference(e, a.ref_k, a.ref_seed)  # perf/adaptive_scoring.py's, shared through its cache
    ref = with_posterior(ref.set_index("id").loc[pool["id"]].reset_index())
    truth = difficulty(ref)
    print(f"pool: {len(pool)} items; reference K={a.ref_k} (seed {a.ref_seed}, {cache}); budget {a.budget}; G = {G}",
          flush=True)

    draws = {"model": draw(model, pool, dataset, g, max(ks), 0)}
    if a.proxy:
        draws["proxy"] = draw(a.proxy, pool, dataset, g, max(ks), 0)
        print(f"  proxy's mean pass rate at K={max(ks)}: {draws['proxy']['pass_rate'].mean():.3f} "
              f"(model's: {draws['model']['pass_rate'].mean():.3f})")
    wanted = {p: set(select(ref, p, a.budget, 0, num_generations=G)["id"]) for p in POLICIES}

    rows = []
    for k in ks:
        tables = {"labels": first_k(draws["model"], k)}
        tables["agreement"] = sources.ranking_counts(tables["labels"], "agreement")
        if "proxy" in draws:
            tables["proxy"] = first_k(draws["proxy"], k)
            tables["proxy_agreement"] = sources.ranking_counts(tables["proxy"], "agreement")
        for source, t in tables.items():
            rho, lo, hi = calibration.spearman_ci(difficulty(t), truth, a.n_boot, 0)
            row = {"K": k, "source": source, "rho": rho, "lo": lo, "hi": hi}
            for p in POLICIES:
                got = set(select(t, p, a.budget, 0, num_generations=G)["id"])
                row[p] = len(got & wanted[p]) / len(wanted[p])
            rows.append(row)
        ent = -tables["labels"]["answer_entropy"].to_numpy(float)
        rho, lo, hi = calibration.spearman_ci(ent, truth, a.n_boot, 0)
        rows.append({"K": k, "source": "answer_entropy", "rho": rho, "lo": lo, "hi": hi})
    out = pd.DataFrame(rows)
    print(f"\nSpearman rho with the K={a.ref_k} reference pass rate [95% interval], and the overlap of each "
          f"policy's {a.budget:.0%} subset with the reference's:")
    print(f"{'K':>3s} {'source':16s} {'rho':>6s} {'interval':>16s}  " + " ".join(f"{p:>9s}" for p in POLICIES))
    for r in out.itertuples():
        over = " ".join(f"{getattr(r, p):9.2f}" if not pd.isna(getattr(r, p, np.nan)) else f"{'':9s}"
                        for p in POLICIES)
        print(f"{r.K:3d} {r.source:16s} {r.rho:6.2f} [{r.lo:5.2f}, {r.hi:5.2f}]     {over}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
