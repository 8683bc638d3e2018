"""The registry of aggregate outputs: the one place an output's name exists.

An output is a function in ``render_arms.py``, ``render_versus.py``, ``render_regime.py``, ``render_drift.py``
(tables), ``figures.py`` (figures) or ``render_compute.py`` (both) decorated
with :func:`output`; its name is its file name (``figures/NAME.png``, ``tables/NAME.csv``) and its caption for the
HTML report is ``workflow/grpo_budget/aggregate/captions/NAME.rst``. The Snakefile's targets, each job's inputs (only the file
roles it reads) and the CLI's choices all come from :data:`OUTPUTS`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import jinja2

from grpo_budget.experiment.plan import arm_source, drift_models, several_budgets, trained_models
from grpo_budget.experiment.sweep import has_sweep

CAPTIONS = Path(__file__).resolve().with_name("captions")  # package data
KINDS = ("summary", "table", "figure")  # summary: the gains table's four files; table: CSV, Markdown, HTML; figure: PNG, PDF


@dataclass(frozen=True)
class Output:
    kind: str
    make: Callable  # (listing, output paths, analysis settings) -> None
    reads: frozenset[str]  # file roles of the run listing it reads (plan.READS)
    needs_ood: bool = False  # only built when some dataset lists out-of-distribution sets
    when: str | None = None  # only built when the config has it: a name of WHEN

    def wanted(self, config: dict) -> bool:
        """Whether the config calls for this output (its ``when`` condition holds, or it has none)."""
        return self.when is None or WHEN[self.when](config)


OUTPUTS: dict[str, Output] = {}


def _sweeps(config: dict) -> bool:
    return has_sweep(config)


def _several_budgets(config: dict) -> bool:
    return several_budgets(config)


def _label_free(config: dict) -> bool:
    """An arm ranks by a label-free or proxy source, or a proxy is configured."""
    return config["scoring"].get("proxy") is not None or any(arm_source(config, a) != "labels"
                                                              for a in config["policies"])


def _several_models(config: dict) -> bool:
    """The grid trains two or more models: a regime map (grpo_budget.aggregate.regime)."""
    return len(trained_models(config)) >= 2


def _drift(config: dict) -> bool:
    """The trained arms are scored again after training (``analysis.drift``)."""
    return bool(drift_models(config))


# Conditions an output can be built under (``Output.when``).
WHEN: dict[str, Callable[[dict], bool]] = {"sweep": _sweeps, "budgets": _several_budgets, "label_free": _label_free,
                                           "models": _several_models, "drift": _drift}


def output(name: str, kind: str, reads: Iterable[str], needs_ood: bool = False, when: str | None = None) -> Callable:
    """Register the decorated function as the aggregate output ``name`` (built only where ``when``, a name of
    :data:`WHEN`, holds for the config)."""
    if kind not in KINDS:
        raise ValueError(f"output {name!r}: kind {kind!r}; allowed: {', '.join(KINDS)}")
    if when is not None and when not in WHEN:
        raise ValueError(f"output {name!r}: when {when!r}; allowed: {', '.join(WHEN)}")

    def register(fn: Callable) -> Callable:
        if name in OUTPUTS:
            raise ValueError(f"output {name!r} is registered twice")
        OUTPUTS[name] = Output(kind, fn, frozenset(reads), needs_ood, when)
        return fn

    return register


def names(kind: str) -> list[str]:
    """The outputs of one kind, in registry order."""
    return [n for n, o in OUTPUTS.items() if o.kind == kind]


# The HTML report's categories (`snakemake --report`), which it lists in name order: the answer first.
ANSWER_TABLES = ("summary", "verdicts")
REPORT_CATEGORIES = {"answer": "1. The answer", "table": "2. Tables", "figure": "3. Figures",
                     "csv": "4. Data (CSV, per seed)"}


def report_category(name: str, fmt: str = "html") -> str:
    """The report category of output ``name``'s file in format ``fmt`` (csv, html or a figure's png)."""
    if fmt == "csv":
        return REPORT_CATEGORIES["csv"]
    if name in ANSWER_TABLES:
        return REPORT_CATEGORIES["answer"]
    return REPORT_CATEGORIES["figure" if OUTPUTS[name].kind == "figure" else "table"]


def caption_file(name: str) -> Path:
    return CAPTIONS / f"{name}.rst"


def caption(name: str, config: dict) -> str:
    """The output's caption for the report, its ``{{ level }}``-style fields filled from the analysis settings."""
    analysis = config["analysis"]
    return jinja2.Template(caption_file(name).read_text()).render(level=round(100 * analysis["level"]),
                                                                 analysis=analysis)
