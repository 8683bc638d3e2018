"""The registry of aggregate outputs: the one place an output's name exists.

An output's name is its file name (``figures/NAME.png``, ``tables/NAME.csv``); its caption for the HTML report is
``workflow/report/captions/NAME.rst``. Adding a table or figure is one entry here, its function, its caption and
its test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import figures, render

CAPTIONS = Path(__file__).resolve().parents[2] / "report" / "captions"


@dataclass(frozen=True)
class Output:
    kind: str  # "summary", "table" (CSV, Markdown, HTML) or "figure" (PNG, PDF)
    make: Callable  # (listing, output paths, analysis settings) -> None
    reads: frozenset[str]  # file roles of the run listing it reads (plan.READS)
    needs_ood: bool = False  # only built when some dataset lists out-of-distribution sets

    def caption_file(self, name: str) -> Path:
        return CAPTIONS / f"{name}.rst"


OUTPUTS: dict[str, Output] = {
    "summary": Output("summary", render.write_summary, frozenset({"evals", "logs", "subsets"})),
    "learnable": Output("table", render.write_learnable, frozenset({"logs", "subsets"})),
    "difficulty": Output("table", render.write_difficulty, frozenset({"evals", "tests"})),
    "ood": Output("table", render.write_ood, frozenset({"ood_evals"}), needs_ood=True),
    "accuracy_vs_checkpoint": Output("figure", figures.figure_accuracy, frozenset({"evals"})),
    "learnable_vs_step": Output("figure", figures.figure_learnable, frozenset({"logs", "subsets"})),
    "pass_rate_histogram": Output("figure", figures.figure_pass_rates, frozenset({"subsets", "scores"})),
    "accuracy_by_difficulty": Output("figure", figures.figure_difficulty, frozenset({"evals", "tests"})),
}


def names(kind: str) -> list[str]:
    """The outputs of one kind, in registry order."""
    return [n for n, o in OUTPUTS.items() if o.kind == kind]


def caption(name: str, config: dict) -> str:
    """The output's caption for the report, its ``{{ level }}``-style fields filled from the analysis settings."""
    import jinja2

    analysis = config["analysis"]
    text = OUTPUTS[name].caption_file(name).read_text()
    return jinja2.Template(text).render(level=round(100 * analysis["level"]), analysis=analysis)
