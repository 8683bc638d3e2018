"""Which arm will pay, predicted before training from the scores alone, and the prediction tested honestly: leave
one base model out of a regime map, predict its arms' ranking from what the others say, compare with what it gained.

Every arm's *features* are the mean over its subset (and its seeds' subsets) of each item's empirical-Bayes
posterior (the pool's Beta prior updated with the item's k of n): ``learnable``, the expected share of GRPO groups
of the training G with mixed rewards (the project's learnability model, :mod:`grpo_budget.learnability`);
``variance``, the expected reward variance 4p(1 - p) (Foster and Foerster's learnability, arXiv 2502.12272);
``mean``, the expected pass rate; and ``pool_mean``, its pool's.

:data:`PREDICTORS` rank a base model's arms (higher: larger predicted gain). ``learnable``, named before any map was
run, is the one ``grpo-budget recommend`` uses; the others are what else was tried, and the baselines. A predictor
with a ``grid`` has one parameter, chosen on the other base models of each fold (the held-out one never sets it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from grpo_budget.aggregate.calibration import spearman
from grpo_budget.learnability import expected_learnable_beta
from grpo_budget.select.posterior import posterior

FEATURES = ("learnable", "variance", "mean", "pool_mean")
PRIMARY = "learnable"  # the predictor named in advance: recommend uses it, whatever the others score
BASELINES = ("always_random", "always_hard")  # the plain baselines a prediction must beat to be used
MIN_BASES = 3  # held-out base models a validation needs (with two, each fold fits on one)


def subset_features(subset: pd.DataFrame, G: int) -> dict[str, float]:
    """A subset's :data:`FEATURES` (but ``pool_mean``) from its items' counts and the pool's prior (``n_correct``,
    ``n_samples``, and ``eb_prior_a``/``eb_prior_b`` where the score table has them); NaN for an unlabeled pool."""
    if subset.empty or subset["n_correct"].isna().any():
        return {"learnable": np.nan, "variance": np.nan, "mean": np.nan}
    a, b = posterior(subset)
    return {"learnable": float(np.mean(expected_learnable_beta(a, b, G))),
            "variance": float(np.mean(4 * a * b / ((a + b) ** 2 * (a + b + 1)))),
            "mean": float(np.mean(a / (a + b)))}


@dataclass(frozen=True)
class Predictor:
    """How a predictor scores one base model's arms (a frame with ``policy`` and :data:`FEATURES`): ``score(arms,
    param)``; ``grid``: the values its one parameter may take, chosen on the training folds by mean Spearman ((None,):
    nothing fitted); ``from_gains``: its parameter is the training folds' mean gain per policy instead."""

    score: Callable[[pd.DataFrame, object], np.ndarray]
    doc: str
    grid: tuple = (None,)
    from_gains: bool = False


def _tilted(arms: pd.DataFrame, lam: float) -> np.ndarray:
    return arms["learnable"].to_numpy(float) * np.exp(lam * (arms["mean"] - arms["pool_mean"]).to_numpy(float))


def _constant(policy: str) -> Callable[[pd.DataFrame, object], np.ndarray]:
    return lambda arms, _: (arms["policy"] == policy).to_numpy(float)


PREDICTORS: dict[str, Predictor] = {
    "learnable": Predictor(lambda arms, _: arms["learnable"].to_numpy(float),
                           "the subset's posterior expected share of mixed GRPO groups at the training G"),
    "variance": Predictor(lambda arms, _: arms["variance"].to_numpy(float),
                          "the subset's posterior expected reward variance 4p(1 - p)"),
    "tilted": Predictor(_tilted, "learnable x exp(lambda x (subset mean - pool mean)): tilted towards easier "
                        "(lambda > 0) or harder subsets, lambda fitted on the other base models",
                        grid=(0.0, -1.0, 1.0, -3.0, 3.0, -10.0, 10.0)),
    "others_mean": Predictor(lambda arms, means: arms["policy"].map(means or {}).fillna(-np.inf).to_numpy(float),
                             "each policy's mean gain over the other base models (one ranking everywhere)",
                             from_gains=True),
    "always_random": Predictor(_constant("random"), "random first, the rest tied"),
    "always_hard": Predictor(_constant("hard"), "hard first, the rest tied"),
}


def _mean_spearman(p: Predictor, arms: pd.DataFrame, param: object) -> float:
    rhos = [spearman(p.score(g, param), g["gain"].to_numpy(float)) for _, g in arms.groupby("base", sort=False)]
    return float(np.nanmean(rhos)) if np.isfinite(rhos).any() else float("nan")


def fit(p: Predictor, train: pd.DataFrame) -> object:
    """A predictor's parameter from the training folds: the grid value with the highest mean Spearman (the first
    such, the grid's order running from the simplest), or each policy's mean gain."""
    if p.from_gains:
        return train.groupby("policy")["gain"].mean().to_dict()
    if len(p.grid) == 1 or train.empty:
        return p.grid[0]
    scores = [_mean_spearman(p, train, v) for v in p.grid]
    best = np.nanargmax(scores) if np.isfinite(scores).any() else 0
    return p.grid[int(best)]


def _param_text(param: object) -> str:
    if isinstance(param, dict):
        return " ".join(f"{k}:{v:+.1f}" for k, v in sorted(param.items(), key=lambda kv: -kv[1]))
    return "" if param is None else f"{param:g}"


def ranking(policies: pd.Series, score: np.ndarray) -> list[list[str]]:
    """Policies from the highest score down, those with equal scores together."""
    order = pd.Series(score, index=list(policies)).sort_values(ascending=False, kind="stable")
    out: list[list[str]] = []
    for policy, v in order.items():
        if out and np.isclose(v, order[out[-1][0]], rtol=1e-9, atol=1e-12):
            out[-1].append(policy)
        else:
            out.append([policy])
    return out


def leave_one_out(arms: pd.DataFrame, names: list[str] | None = None) -> pd.DataFrame:
    """Each base model held out in turn, each predictor fitted on the others and scored on it. ``arms``: one row
    per base model and arm, with ``base`` (a label), ``policy``, ``gain`` (points), ``first`` (no arm beats it
    distinguishably) and :data:`FEATURES`. Per fold and predictor: its parameter, predicted ranking, ``hit`` (the
    share of its top arms that are tied first), ``spearman`` with the gains, ``chance`` (the share of arms tied
    first: a blind pick's hit) and ``decided`` (some arm is not tied first)."""
    rows = []
    for base, test in arms.groupby("base", sort=False):
        train = arms[arms["base"] != base]
        first = test["first"].astype(bool).to_numpy()
        for name in names or list(PREDICTORS):
            p = PREDICTORS[name]
            param = fit(p, train)
            score = p.score(test, param)
            ranked = ranking(test["policy"], score)
            top = set(ranked[0])
            rows.append({"base": base, "predictor": name, "param": _param_text(param),
                         "predicted": " > ".join(" = ".join(r) for r in ranked),
                         "observed": " > ".join(test.sort_values("gain", ascending=False)["policy"]),
                         "first": " ".join(test["policy"][first]), "hit": float(np.mean([p in set(
                             test["policy"][first]) for p in top])),
                         "spearman": spearman(score, test["gain"].to_numpy(float)),
                         "chance": float(first.mean()), "decided": bool(not first.all()),
                         "training_bases": int(train["base"].nunique())})
    return pd.DataFrame(rows)


def validation(folds: pd.DataFrame) -> pd.DataFrame:
    """Per predictor over the held-out base models: folds, hits, hit rate (on all folds and on the decided ones),
    mean Spearman, and the hit rate a blind pick would have."""
    rows = []
    for name, f in folds.groupby("predictor", sort=False):
        d = f[f["decided"]]
        rows.append({"predictor": name, "bases": len(f), "hits": float(f["hit"].sum()),
                     "hit_rate": float(f["hit"].mean()), "decided": len(d),
                     "hit_rate_decided": float(d["hit"].mean()) if len(d) else np.nan,
                     "spearman": float(f["spearman"].mean()) if f["spearman"].notna().any() else np.nan,
                     "chance": float(f["chance"].mean())})
    return pd.DataFrame(rows)


def beats_baselines(summary: pd.DataFrame, name: str = PRIMARY) -> tuple[bool, str]:
    """Whether predictor ``name`` beat each of :data:`BASELINES` on at least :data:`MIN_BASES` held-out base models:
    a hit rate at least theirs and a higher mean Spearman; and the reason in words, with the numbers."""
    by = summary.set_index("predictor")
    if name not in by.index:
        return False, f"no validation of predictor {name!r}"
    me = by.loc[name]
    if me["bases"] < MIN_BASES:
        return False, f"validated on {int(me['bases'])} base model(s); it needs {MIN_BASES} or more"
    lost = [b for b in BASELINES if b in by.index and not (
        me["hit_rate"] >= by.loc[b, "hit_rate"] and me["spearman"] > by.loc[b, "spearman"])]
    numbers = "; ".join(f"{n}: hit rate {by.loc[n, 'hit_rate']:.0%}, Spearman {by.loc[n, 'spearman']:+.2f}"
                        for n in (name, *BASELINES) if n in by.index)
    if lost:
        return False, f"it does not beat {' and '.join(lost)} ({numbers})"
    return True, numbers
