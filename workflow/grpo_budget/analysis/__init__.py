"""Aggregate stage: tables and figures from the cached outputs of every run.

The workflow writes the typed run listing (:class:`grpo_budget.plan.Listing`) to a file; each output of the
registry :data:`outputs.OUTPUTS` is its own Snakemake target and reads only the files its job lists as inputs.
Modules: ``read`` (cached files, arm order), ``tables`` (data frames), ``render`` (CSV, Markdown, HTML),
``figures`` (PNG, PDF), ``outputs`` (the registry, filled by the functions of ``render`` and ``figures``). Every statistic is in :mod:`grpo_budget.stats`.

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

from ..errors import UserError
from ..plan import Listing
from ..settings import Analysis
from . import figures, render  # noqa: F401  (their functions register themselves in OUTPUTS)
from .outputs import OUTPUTS
from .read import as_settings
from .tables import curves, difficulty_table, gains_over_seeds, learnable_table, ood_table, summary_table, tiers

__all__ = ["OUTPUTS", "run", "curves", "difficulty_table", "gains_over_seeds", "learnable_table", "ood_table",
           "summary_table", "tiers"]


def run(name: str, listing: Listing | str | Path, outs: list[str], settings: Analysis | dict | None) -> None:
    """Write the output ``name`` of :data:`OUTPUTS` to ``outs`` (a figure: each path in its own format)."""
    if name not in OUTPUTS:
        raise UserError(f"unknown aggregate output {name!r}; allowed: {', '.join(OUTPUTS)}")
    if not isinstance(listing, Listing):
        listing = Listing.read(listing)
    OUTPUTS[name].make(listing, list(outs), as_settings(settings))
