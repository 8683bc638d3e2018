"""Adaptive vs fixed-K difficulty scoring on the embedded pool, against a high-K reference, in one run.

For each scoring method: the samples it drew, and for each policy at the budget, the overlap of its subset with the
reference's subset and the mean reference pass rate of the items it chose. The reference is K=64 samples per item
under another seed; where the reference itself ties at its cut, an item's reference membership is its share of
``--tie-draws`` seeded tie-breaks (so overlap never rewards a lucky tie-break). Fixed K uses the first K of one
K=16 draw per item (samples of an item are exchangeable), adaptive scoring the workflow's own rounds
(``scoring.score_in_rounds``) at each listed setting; every method is drawn ``--replicates`` times (seeds 0..R-1)
and its figures averaged.

    snakemake results/scores/tiny/framearith.parquet    # the embedded model and pool, once
    python perf/adaptive_scoring.py                     # prints the table
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from grpo_budget.digest import model_digest
from grpo_budget.experiment import config
from grpo_budget.config.settings import Adaptive, Generation
from grpo_budget.generation import sample
from grpo_budget.generation.backends import from_settings
from grpo_budget.generation.sampling import Sampling
from grpo_budget.io import read_parquet, write_parquet
from grpo_budget.score import scoring
from grpo_budget.select import policies, posterior

POLICIES = ["hard", "medium", "easy", "learnable"]


def counts_table(k: np.ndarray, n: np.ndarray) -> pd.DataFrame:
    t = posterior.posterior_table(k, n)
    return t.assign(id=np.arange(len(t)), pass_rate=t["n_correct"] / t["n_samples"])


def membership(table: pd.DataFrame, policy: str, budget: float, G: int, draws: int) -> np.ndarray:
    """Each item's share of ``draws`` seeded tie-breaks in which ``policy`` buys it."""
    share = np.zeros(len(table))
    for seed in range(draws):
        share[policies.select(table, policy, budget, seed, num_generations=G)["id"].to_numpy()] += 1
    return share / draws


def overlaps(k: np.ndarray, n: np.ndarray, ref: dict, ref_rate: np.ndarray, budget: float, G: int) -> dict:
    table = counts_table(k, n)
    out = {}
    for policy in POLICIES:
        chosen = policies.select(table, policy, budget, 0, num_generations=G)["id"].to_numpy()
        out[policy] = (float(ref[policy][chosen].sum() / len(chosen)), float(ref_rate[chosen].mean()))
    return out


def row(name: str, runs: list[tuple[int, dict]], only: str | None = None) -> dict:
    """Means over replicate draws: samples, and per policy (or ``only`` one) the overlap and reference pass rate."""
    out = {"scoring": name, "samples": round(float(np.mean([r[0] for r in runs])))}
    for policy in [only] if only else POLICIES:
        out[f"{policy} overlap"] = float(np.mean([r[1][policy][0] for r in runs]))
        out[f"{policy} ref p"] = float(np.mean([r[1][policy][1] for r in runs]))
    return out


def embedded(results: str, config_path: str) -> SimpleNamespace:
    """The embedded default's first dataset, its prepared pool, its first model's folder, the scoring settings (fixed
    K) and the training G, from a finished run in ``results``: what the perf scripts sample from."""
    cfg = config.load(config_path)
    ds_name = next(iter(cfg["datasets"]))
    g = Generation.from_dict({k: v for k, v in cfg["scoring"].items() if not k.startswith("verify_")
                              and k != "adaptive"}, "scoring")
    return SimpleNamespace(results=Path(results), ds_name=ds_name, dataset=cfg["datasets"][ds_name], g=g,
                           pool=read_parquet(Path(results) / "data" / ds_name / "pool.parquet"),
                           model=str(Path(results) / "models" / next(iter(cfg["models"]))),
                           G=cfg["training"]["num_generations"], rounding=cfg["budget_rounding"])


def reference(e: SimpleNamespace, k: int, seed: int) -> tuple[pd.DataFrame, Path]:
    """K graded samples per pool item with their own seed (counts only), and its cache file. The reference is the
    costliest part: kept beside the results, keyed by model and settings, for re-runs and for perf/label_free.py."""
    key = hashlib.sha256(json.dumps([model_digest(e.model), asdict(e.g), k, seed], sort_keys=True,
                                    default=str).encode()).hexdigest()[:12]
    cache = e.results / "perf" / f"adaptive_reference-{key}.parquet"
    if cache.exists():
        return read_parquet(cache), cache
    ref = sample.sample_and_grade(from_settings(e.model, e.g), e.pool, e.dataset,
                                   replace(Sampling.of(e.g), n=k, seed=seed))
    write_parquet(ref[["id", "n_samples", "n_correct", "pass_rate"]], cache)
    return ref, cache


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results", help="the embedded default's results folder")
    ap.add_argument("--config", default="config.yaml")
    ap.add_argument("--budget", type=float, default=0.1)
    ap.add_argument("--ref-k", type=int, default=64)
    ap.add_argument("--ref-seed", type=int, default=101)
    ap.add_argument("--replicates", type=int, default=2, help="draws per method (seeds 0..R-1), averaged")
    ap.add_argument("--fixed", default="4,8,16", help="fixed K values (the first K of a K=max draw)")
    ap.add_argument("--adaptive", default="2:2:32:0.9:4.8:0.05,2:2:32:0.9:8:0.05",
                    help="adaptive settings first:step:max_samples:confidence:mean_samples:tolerance, comma-separated")
    ap.add_argument("--tie-draws", type=int, default=100)
    a = ap.parse_args()

    e = embedded(a.results, a.config)
    pool, dataset, g, G, model = e.pool, e.dataset, e.g, e.G, e.model
    gen = from_settings(model, g)
    print(f"pool: {len(pool)} items of {e.ds_name}; model {model}; budget {a.budget}; G = {G}; "
          f"{a.replicates} draws per method", flush=True)

    t0 = time.perf_counter()
    ref, cache = reference(e, a.ref_k, a.ref_seed)
    print(f"reference: K={a.ref_k}, seed {a.ref_seed}: {time.perf_counter() - t0:.0f} s ({cache})", flush=True)
    ref_table = counts_table(ref["n_correct"].to_numpy(), ref["n_samples"].to_numpy())
    ref_rate = ref["pass_rate"].to_numpy()
    ref_sets = {p: membership(ref_table, p, a.budget, G, a.tie_draws) for p in POLICIES}

    rows = []
    fixed = [int(x) for x in a.fixed.split(",")]
    runs: dict[int, list] = {K: [] for K in fixed}
    for r in range(a.replicates):
        draw = sample.sample_and_grade(gen, pool, dataset, replace(Sampling.of(g), n=max(fixed), seed=r))
        correct = np.array([np.asarray(c, dtype=int) for c in draw["correct"]])
        for K in fixed:
            runs[K].append((K * len(pool), overlaps(correct[:, :K].sum(1), np.full(len(pool), K), ref_sets,
                                                     ref_rate, a.budget, G)))
    rows += [row(f"fixed K={K}", runs[K]) for K in fixed]
    for r in rows:
        print(r, flush=True)

    for spec in filter(None, a.adaptive.split(",")):
        first, step, mx, conf, mean, tol = spec.split(":")
        s = Adaptive(int(first), int(step), int(mx), float(conf), float(mean), float(tol))
        for only in POLICIES[:3] + [None]:  # each policy's cut alone, then every policy's at once
            cuts = {"policies": [only] if only else POLICIES, "budgets": [a.budget],
                    "rounding": e.rounding, "group_size": G}
            runs_a = []
            for r in range(a.replicates):
                folder = Path(tempfile.mkdtemp()) / "rounds"
                out = scoring.score_in_rounds(gen, pool, dataset, replace(g, seed=r), s, cuts, folder,
                                              {"model": model})
                shutil.rmtree(folder.parent, ignore_errors=True)
                runs_a.append((int(out["n_samples"].sum()), overlaps(out["n_correct"].to_numpy(),
                                                                     out["n_samples"].to_numpy(), ref_sets,
                                                                     ref_rate, a.budget, G)))
            label = f"adaptive {first}+{step}..{mx} @{conf} cap {mean}/item tol {tol}: {only or 'all cuts'}"
            rows.append(row(label, runs_a, only))
            print(rows[-1], f"({time.perf_counter() - t0:.0f} s)", flush=True)

    table = pd.DataFrame(rows)
    print("\noverlap: share of the reference subset's items chosen (ties at the reference cut count fractionally); "
          f"ref p: mean K={a.ref_k} pass rate of the chosen items; means over {a.replicates} draws. An adaptive row "
          "for one policy settles that policy's cut alone; 'all cuts' settles those of hard, medium, easy and "
          "learnable at once, as the workflow does for a config with all four.\n")
    print(table.to_markdown(index=False, floatfmt=".3f", missingval=""))


if __name__ == "__main__":
    main()
