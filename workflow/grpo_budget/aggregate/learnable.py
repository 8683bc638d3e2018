"""The learnable-opportunities table: the predicted share of GRPO groups with mixed rewards (plug-in, posterior,
fresh) against the share observed over the first training steps."""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_budget import stats
from grpo_budget.aggregate.read import KEYS, available_columns, read_table, sort_arms, finish
from grpo_budget.experiment.plan import Listing
from grpo_budget.config.settings import Analysis
from grpo_budget.learnability import expected_learnable_beta, expected_learnable_share, learnable_from_log, window_steps


def _fresh_counts(runs: Listing, r) -> pd.DataFrame | None:
    """The verification's fresh counts of this run's model and dataset (indexed by id), where it ran."""
    path = next((v.path for v in runs.verify if (v.model, v.dataset) == (r.model, r.dataset)), None)
    return read_table(path, ["id", "n_samples", "n_correct"]).set_index("id") if path else None


def predicted_shares(subset: pd.DataFrame, fresh: pd.DataFrame | None, num_generations: int) -> dict:
    """A subset's predicted share of GRPO groups of ``num_generations`` with mixed rewards, four ways (NaN where
    the inputs lack what one needs): ``plugin``, 1 − pᴳ − (1 − p)ᴳ at the scored ``pass_rate``; ``posterior``, its expectation
    under each item's empirical-Bayes posterior (the pool's prior, ``eb_prior_a``/``eb_prior_b``, updated with the
    item's ``n_correct`` of ``n_samples``); ``fresh``, the same prior updated with ``fresh``'s new counts instead
    (indexed by id: the verification's, which the selection did not pick on); ``all``, the posterior updated with
    the fresh counts too (every sample of the item).

    ``all`` is the one posterior given everything seen, so the items' scoring counts, which set them apart from the
    pool, still count; ``fresh`` alone shrinks every subset back towards the pool's mean (a hard subset's items are
    not a random draw from the pool), the more so the more concentrated the pool's prior."""
    plugin = expected_learnable_share(subset["pass_rate"].to_numpy(), num_generations)
    has_prior = {"eb_prior_a", "eb_prior_b", "n_correct", "n_samples"} <= set(subset.columns) and bool(
        np.isfinite(subset[["eb_prior_a", "eb_prior_b", "n_correct"]].to_numpy(float)).all())  # unlabeled: NaN
    posterior = fresh_share = every = np.nan
    if has_prior:
        a0, b0 = subset["eb_prior_a"].to_numpy(float), subset["eb_prior_b"].to_numpy(float)
        k, n = subset["n_correct"].to_numpy(float), subset["n_samples"].to_numpy(float)
        posterior = float(np.mean(expected_learnable_beta(a0 + k, b0 + n - k, num_generations)))
        if fresh is not None:
            f = fresh.reindex(subset["id"])
            if f["n_samples"].notna().all():
                kf, nf = f["n_correct"].to_numpy(float), f["n_samples"].to_numpy(float)
                fresh_share = float(np.mean(expected_learnable_beta(a0 + kf, b0 + nf - kf, num_generations)))
                every = float(np.mean(expected_learnable_beta(a0 + k + kf, b0 + n - k + nf - kf, num_generations)))
    return {"plugin": plugin, "posterior": posterior, "fresh": fresh_share, "all": every}


def learnable_row(r, runs: Listing, s: Analysis) -> dict:
    """Predicted learnable share of one run's subset (:func:`predicted_shares`), and the share observed at the start
    of training. The table leads with all (the posterior after the verification's samples too) where the
    verification ran, else posterior. The group size and the groups per step are the run's own (a sweep variant's where it sweeps
    them).
    """
    num_generations = int(runs.training_value(r, "num_generations"))
    groups = int(runs.training_value(r, "prompts_per_step"))
    cols = ["id", "pass_rate", "n_samples", "n_correct", "eb_prior_a", "eb_prior_b"]
    subset = read_table(r.subset, available_columns(r.subset, cols))
    shares = predicted_shares(subset, _fresh_counts(runs, r), num_generations)
    plugin, posterior, fresh, every = shares["plugin"], shares["posterior"], shares["fresh"], shares["all"]
    lead, lead_name = (every, "all") if np.isfinite(every) else (posterior, "posterior") if np.isfinite(posterior) \
        else (plugin, "plug-in")
    log = read_table(r.log)
    learn = learnable_from_log(log) if "frac_reward_zero_std" in log else pd.DataFrame(columns=["learnable"])
    n = window_steps(len(learn), s.learnable_window)
    first = float(learn["learnable"].iloc[:n].mean()) if n else np.nan
    lo, hi = stats.wilson_interval(first, n * groups, s.level)
    return {**{k: getattr(r, k) for k in KEYS}, "subset_size": len(subset), "G": num_generations,
            "logged_steps": len(learn),
            "window_steps": n, "window_groups": n * groups,
            "predicted_pct": 100 * lead, "predicted_from": lead_name, "predicted_plugin_pct": 100 * plugin,
            "predicted_posterior_pct": 100 * posterior, "predicted_fresh_pct": 100 * fresh,
            "predicted_all_pct": 100 * every,
            "observed_first_pct": 100 * first, "observed_lo": 100 * lo, "observed_hi": 100 * hi,
            "observed_all_pct": 100 * float(learn["learnable"].mean()) if len(learn) else np.nan,
            "diff_pts": 100 * (first - lead),
            "predicted_in_interval": bool(lo <= lead <= hi) if np.isfinite(lo) else False}


def learnable_table(runs: Listing, s: Analysis) -> pd.DataFrame:
    """Per run: predicted share of groups with non-zero reward std vs the share observed over the first steps.

    ``observed_first_pct`` is the mean of 1 − frac_reward_zero_std over the first ``window_steps`` logged steps
    (``analysis.learnable_window``); ``observed_lo``/``observed_hi`` a Wilson interval over those steps' groups
    (prompts_per_step per step); ``observed_all_pct`` the mean over all steps (the paper's "learnable %").
    """
    table = sort_arms(pd.DataFrame([learnable_row(r, runs, s) for r in runs.runs]), ["seed"]).reset_index(drop=True)
    return finish(table, runs)
