"""Scoring and the learnability prediction of finished embedded-style runs, at any competence: what issue 57 measures.

    .venv/bin/python perf/extremes.py --config low.yaml --results results-low [results-low-2 ...] [--reference]

Prints, for each results folder (runs of one config and one base model, e.g. before and after a change): the samples
per item adaptive scoring spent, the share of items at 0 and at all correct, the pool's Beta prior (``eb_prior_a``,
``eb_prior_b``) and the spread of the posterior means every policy orders by; then per arm (seeds pooled) the
learnability prediction three ways (posterior: the scoring counts; fresh: the verification's; all: both) against the
share of mixed groups observed at step 1 (a 95% Wilson interval over the seeds' groups). With ``--reference`` it also
draws K=64 samples (seed 101, as perf/adaptive_scoring.py's reference) of every item some folder's subsets hold,
cached under the first folder's perf/, and adds each arm's reference share: the mean over the arm's items of the
unbiased estimate of 1 − pᴳ − (1 − p)ᴳ from 64 samples (``C(k, G) / C(64, G)`` for pᴳ, as pass@k's estimator), a far
tighter target than the 16 or 32 groups of step 1. Samples are keyed by (seed, item, sample index), so an item's
reference counts do not depend on which other items were drawn with it.
"""

from __future__ import annotations

import argparse
import sys
from math import comb
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))

from adaptive_scoring import embedded  # noqa: E402  (perf/, beside this script)

from grpo_budget import stats  # noqa: E402
from grpo_budget.digest import model_digest  # noqa: E402
from grpo_budget.generation.backends import from_settings  # noqa: E402
from grpo_budget.generation.sample import sample_and_grade  # noqa: E402
from grpo_budget.generation.sampling import Sampling  # noqa: E402
from grpo_budget.io import read_parquet, write_parquet  # noqa: E402
from grpo_budget.learnability import expected_learnable_beta  # noqa: E402


def unbiased_mixed(k: np.ndarray, n: int, G: int) -> np.ndarray:
    """Per item, the unbiased estimate of 1 − pᴳ − (1 − p)ᴳ from ``k`` of ``n`` correct (``n >= G``)."""
    return np.array([1 - comb(int(c), G) / comb(n, G) - comb(n - int(c), G) / comb(n, G) for c in k])


def subset_files(results: Path) -> list[Path]:
    return sorted((results / "runs").glob("*/*/*/b*/s*/subset.parquet"))


def item_reference(e, ids: list[str], k: int, seed: int) -> pd.DataFrame:
    """``k`` graded samples of each of ``ids`` (counts only), cached by model, settings, k, seed and items."""
    import hashlib
    import json
    from dataclasses import asdict, replace

    key = hashlib.sha256(json.dumps([model_digest(e.model), asdict(e.g), k, seed, sorted(ids)], sort_keys=True,
                                    default=str).encode()).hexdigest()[:12]
    cache = e.results / "perf" / f"extremes_reference-{key}.parquet"
    if cache.exists():
        return read_parquet(cache)
    pool = e.pool[e.pool["id"].isin(ids)]
    ref = sample_and_grade(from_settings(e.model, e.g), pool, e.dataset, replace(Sampling.of(e.g), n=k, seed=seed))
    write_parquet(ref[["id", "n_samples", "n_correct", "pass_rate"]], cache)
    return ref


def scoring_report(scores: pd.DataFrame) -> dict:
    n, k, eb = scores["n_samples"], scores["n_correct"], scores["pass_rate_eb"]
    a, b = float(scores["eb_prior_a"].iloc[0]), float(scores["eb_prior_b"].iloc[0])
    return {"items": len(scores), "samples per item": round(float(n.mean()), 3),
            "samples min/max": f"{int(n.min())}/{int(n.max())}",
            "samples histogram": dict(sorted(n.value_counts().to_dict().items())),
            "share at 0 correct": round(float((k == 0).mean()), 3),
            "share all correct": round(float((k == n).mean()), 3),
            "prior alpha, beta": (round(a, 3), round(b, 3)), "alpha + beta": round(a + b, 2),
            "prior mean": round(a / (a + b), 4),
            "posterior mean: mean, sd": (round(float(eb.mean()), 4), round(float(eb.std()), 4)),
            "posterior mean: min, max": (round(float(eb.min()), 4), round(float(eb.max()), 4)),
            "posterior 95% interval width, mean": round(float((scores["pass_rate_eb_hi"]
                                                                 - scores["pass_rate_eb_lo"]).mean()), 4)}


def arm_rows(results: Path, learnable: pd.DataFrame, verify: pd.DataFrame | None, ref: pd.DataFrame | None,
             G: int) -> pd.DataFrame:
    """Per arm, seeds pooled: the table's predictions, the all-samples one, the reference share, the observed."""
    rows = []
    for policy, runs in learnable.groupby("policy", sort=False):
        first = runs["observed_first_pct"].to_numpy() / 100
        n_groups = int(runs["window_groups"].sum())
        observed = float(np.average(first, weights=runs["window_groups"]))
        lo, hi = stats.wilson_interval(observed, n_groups, 0.95)
        row = {"arm": policy, "posterior": runs["predicted_posterior_pct"].mean(),
               "fresh": runs["predicted_fresh_pct"].mean()}
        alls, refs = [], []
        for r in runs.itertuples():
            subset = read_parquet(results / "runs" / r.model / r.dataset / r.policy / f"b{r.budget}" / f"s{r.seed}"
                                  / "subset.parquet")
            a0, b0 = subset["eb_prior_a"].to_numpy(float), subset["eb_prior_b"].to_numpy(float)
            k, n = subset["n_correct"].to_numpy(float), subset["n_samples"].to_numpy(float)
            if verify is not None:
                f = verify.set_index("id").reindex(subset["id"])
                kf, nf = f["n_correct"].to_numpy(float), f["n_samples"].to_numpy(float)
                alls.append(np.mean(expected_learnable_beta(a0 + k + kf, b0 + n - k + nf - kf, G)))
            if ref is not None:
                rr = ref.set_index("id").reindex(subset["id"])
                refs.append(np.mean(unbiased_mixed(rr["n_correct"].to_numpy(), int(rr["n_samples"].iloc[0]), G)))
        row["all"] = 100 * float(np.mean(alls)) if alls else np.nan
        row["reference"] = 100 * float(np.mean(refs)) if refs else np.nan
        row.update({"observed step 1": 100 * observed, "observed lo": 100 * lo, "observed hi": 100 * hi,
                    "groups": n_groups})
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, nargs="+", required=True,
                    help="finished runs of one embedded-style config and base model")
    ap.add_argument("--config", default="config.yaml", help="the config they ran (the first folder's model is used)")
    ap.add_argument("--reference", action="store_true", help="add the K=64 reference share of each arm")
    ap.add_argument("--ref-k", type=int, default=64)
    ap.add_argument("--ref-seed", type=int, default=101)
    a = ap.parse_args()

    e = embedded(str(a.results[0]), a.config)
    ref = None
    if a.reference:
        ids = sorted({i for r in a.results for f in subset_files(r) for i in read_parquet(f)["id"]})
        ref = item_reference(e, ids, a.ref_k, a.ref_seed)
        print(f"reference: K={a.ref_k}, seed {a.ref_seed}, {len(ids)} items of the subsets")
    for results in a.results:
        print(f"\n## {results}\n")
        model = Path(e.model).name
        scores = read_parquet(results / "scores" / model / f"{e.ds_name}.parquet")
        for key, value in scoring_report(scores).items():
            print(f"{key}: {value}")
        verify_path = results / "verify" / model / f"{e.ds_name}.parquet"
        verify = read_parquet(verify_path) if verify_path.exists() else None
        learnable = pd.read_csv(results / "tables" / "learnable.csv")
        table = arm_rows(results, learnable, verify, ref, e.G)
        print("\nlearnable share at step 1 (%), seeds pooled: predicted from the posterior (scoring counts), fresh "
              "(verification counts), all (both); observed with a 95% Wilson interval; reference (K=64 unbiased)\n")
        print(table.to_markdown(index=False, floatfmt=".1f"))


if __name__ == "__main__":
    main()
