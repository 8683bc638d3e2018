"""How well a label-free difficulty source tracks gold pass rates: Spearman's rho with a bootstrap interval,
confident wrong majorities by gold pass-rate tier, and the label-free calibration table built from them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from grpo_budget import stats
from grpo_budget.aggregate.read import available_columns, read_table
from grpo_budget.experiment.plan import FULL_LABEL, Listing, parse_budget
from grpo_budget.config.settings import Analysis
from grpo_budget.select.policies import difficulty, select
from grpo_budget.select.sources import ranking_counts


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN when either side is constant."""
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def spearman_ci(x: np.ndarray, y: np.ndarray, n_boot: int, seed: int, level: float = 0.95
                ) -> tuple[float, float, float]:
    """Spearman's ρ and its percentile bootstrap interval over items."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    rho = spearman(x, y)
    if math.isnan(rho):
        return rho, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    boots = [spearman(x[i], y[i]) for i in (rng.integers(0, len(x), len(x)) for _ in range(n_boot))]
    lo, hi = np.nanquantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return rho, float(lo), float(hi)


TIERS = [(0.0, 0.0, "0"), (0.0, 0.25, "(0, 0.25]"), (0.25, 0.5, "(0.25, 0.5]"), (0.5, 0.75, "(0.5, 0.75]"),
         (0.75, 1.0, "(0.75, 1]")]


CONFIDENT = 0.5  # a majority of more than half the samples


def tier_of(pass_rate: float) -> str:
    """The gold pass-rate tier of an item (:data:`TIERS`; 0 on its own, then quarter-open intervals)."""
    for lo, hi, name in TIERS:
        if (pass_rate == 0 and hi == 0) or lo < pass_rate <= hi:
            return name
    return "?"


def confident_wrong(scores: pd.DataFrame) -> pd.DataFrame:
    """By gold pass-rate tier: items, the share whose majority answer is wrong though more than :data:`CONFIDENT`
    of the samples give it (the failure that makes agreement rank a hard item as easy), with a Wilson interval."""
    wrong = ~scores.apply(lambda r: not pd.isna(r["majority_answer"]) and _majority_correct(r), axis=1)
    confident = scores["agreement"] > CONFIDENT
    tier = scores["pass_rate"].map(tier_of)
    rows = []
    for _, _, name in TIERS:
        m = (tier == name).to_numpy()
        n = int(m.sum())
        share = float((wrong & confident).to_numpy()[m].mean()) if n else float("nan")
        lo, hi = stats.wilson_interval(share, n, 0.95) if n else (float("nan"), float("nan"))
        rows.append({"tier": name, "items": n, "confident_wrong": share, "lo": lo, "hi": hi})
    return pd.DataFrame(rows)


def _majority_correct(row: pd.Series) -> bool:
    """Whether an item's majority answer is one its correct samples gave."""
    return any(ok and a == row["majority_answer"] for a, ok in zip(row["answers"], row["correct"]))


CALIBRATED_POLICIES = ("hard", "medium", "easy")


def label_free_calibration(runs: Listing, s: Analysis) -> pd.DataFrame:
    """How well each label-free or proxy difficulty source stands in for the gold pass rate, per model × dataset
    whose pool has gold answers (long form: one row per source and measure).

    - ``rho``: Spearman ρ between the source and the trained model's gold pass rate over the pool, with a
      percentile bootstrap interval over items (answer entropy enters negated, so that higher = easier throughout).
    - ``overlap``: the share of the label-selected subset that the same policy picks by the source, at each budget
      of the runs (tie-break seed: the runs' first).
    - ``confident_wrong``: by gold pass-rate tier, the share of items whose majority answer is wrong though more
      than half the samples give it (proxy_agreement: the proxy's majority, tiers by its own pass rate).
    """
    proxies = {p.dataset: p.path for p in runs.proxy_scores}
    budgets = sorted({r.budget for r in runs.runs if r.budget != FULL_LABEL}, key=lambda b: float(parse_budget(b)))
    seed = min((r.seed for r in runs.runs), default=0)
    cols = ["id", "n_samples", "n_correct", "pass_rate", "pass_rate_eb", "answers", "correct", "majority_answer",
            "n_agree", "agreement", "answer_entropy"]
    rows = []
    for sc in runs.scores:
        gold = read_table(sc.path, available_columns(sc.path, cols))
        if "agreement" not in gold or gold["pass_rate"].isna().all():
            continue  # scored before label-free difficulty, or an unlabeled pool: nothing to check against
        truth = difficulty(gold)
        signals = {"agreement": ranking_counts(gold, "agreement"), "answer_entropy": None}
        proxy = None
        if sc.dataset in proxies:
            path = proxies[sc.dataset]
            proxy = read_table(path, available_columns(path, cols)).set_index("id").loc[gold["id"]].reset_index()
            signals.update(proxy=proxy, proxy_agreement=ranking_counts(proxy, "agreement"))
        key = {"model": sc.model, "dataset": sc.dataset}
        # The label-selected subsets every source is compared with, once per budget and policy.
        wanted = {(budget, policy): set(select(gold, policy, parse_budget(budget), seed)["id"])
                  for budget in budgets for policy in CALIBRATED_POLICIES}
        for source, table in signals.items():
            values = -gold["answer_entropy"].to_numpy(float) if source == "answer_entropy" else difficulty(table)
            rho, lo, hi = spearman_ci(values, truth, min(s.n_boot, 1000), s.seed, s.level)
            rows.append({**key, "source": source, "measure": "rho", "at": "", "value": rho, "lo": lo, "hi": hi,
                         "items": len(gold)})
            if table is None:
                continue
            for (budget, policy), want in wanted.items():
                got = set(select(table, policy, parse_budget(budget), seed)["id"])
                rows.append({**key, "source": source, "measure": "overlap", "at": f"{policy} @ {budget}",
                             "value": len(want & got) / len(want), "lo": np.nan, "hi": np.nan, "items": len(want)})
        for source, table in (("agreement", gold), ("proxy_agreement", proxy)):
            if table is None:
                continue
            for _, t in confident_wrong(table).iterrows():
                rows.append({**key, "source": source, "measure": "confident_wrong", "at": f"tier {t['tier']}",
                             "value": t["confident_wrong"], "lo": t["lo"], "hi": t["hi"], "items": t["items"]})
    return pd.DataFrame(rows, columns=["model", "dataset", "source", "measure", "at", "value", "lo", "hi", "items"])
