"""Aggregate stage: tables and figures from the cached outputs of every run.

The workflow writes the typed run listing (:class:`grpo_budget.experiment.plan.Listing`) to a file; each output of the
registry :data:`OUTPUTS` (complete once this module is imported) is its own Snakemake target and reads only the files its job lists as inputs.
Modules: ``read`` (cached files, arm order); the tables as data frames: ``gains``, ``learnable``, ``tiers``
(difficulty, out of distribution), ``verdicts`` (arm against arm, steps to match), ``calibration`` (label-free);
``render`` (shared CSV, Markdown, HTML writing), ``render_arms`` and ``render_versus`` (the tables' files),
``figures`` (PNG, PDF), ``compute`` and ``render_compute`` (cost per arm, matched compute); ``outputs`` (the registry, filled by the functions of ``render_*`` and ``figures``). Every
statistic is in :mod:`grpo_budget.stats`, :mod:`grpo_budget.learnability` or :mod:`grpo_budget.beta`.

Conventions
-----------
* Accuracies are fractions; gains are in percentage points; relative gains are fractions of the base model's
  headroom, ``(trained - base) / (1 - base)``.
* Intervals are percentile bootstrap intervals at ``analysis.level``. With one seed they resample test items
  (paired: the same items for base and trained). With several seeds of an arm they resample seeds *and* test items
  (a two-stage bootstrap), so they cover both the item sampling and the seed-to-seed spread.
* Per-seed rows go to the CSV files; Markdown and HTML show one row per arm (mean over seeds, ± = std over seeds).
"""

from __future__ import annotations

from pathlib import Path

# Their functions register themselves in OUTPUTS, in import order, which is the order of the workflow's targets and
# cost jobs: the tables (render_arms, then render_versus), then the figures.
from grpo_budget.aggregate import render_arms, render_versus  # noqa: F401
from grpo_budget.aggregate import render_regime  # noqa: F401  (the regime map's prediction, after its table)
from grpo_budget.aggregate import render_drift  # noqa: F401  (with analysis.drift)

# isort: split
from grpo_budget.aggregate import figures  # noqa: F401

# isort: split
from grpo_budget.aggregate import render_compute  # noqa: F401  (its tables and figure, after the figures it draws on)
from grpo_budget.aggregate.outputs import OUTPUTS, caption, names, report_category
from grpo_budget.config.settings import Analysis
from grpo_budget.errors import UserError
from grpo_budget.experiment.plan import Listing, has_ood

# the registry, complete (importing this module fills it)
__all__ = ["OUTPUTS", "built", "caption", "names", "report_category", "run"]


def built(config: dict) -> list[str]:
    """The outputs a config builds, in registry order: those that need out-of-distribution sets only when some
    dataset lists them, each only where the config calls for it."""
    return [n for n, o in OUTPUTS.items() if (not o.needs_ood or has_ood(config)) and o.wanted(config)]


def run(name: str, listing: Listing | str | Path, outs: list[str], settings: dict | None) -> None:
    """Write the output ``name`` of :data:`OUTPUTS` to ``outs`` (a figure: each path in its own format), with the
    config's ``analysis`` section ``settings`` (completed with the schema's defaults)."""
    if name not in OUTPUTS:
        raise UserError(f"unknown aggregate output {name!r}; allowed: {', '.join(OUTPUTS)}")
    if not isinstance(listing, Listing):
        listing = Listing.read(listing)
    OUTPUTS[name].make(listing, list(outs), Analysis.from_dict(settings))
