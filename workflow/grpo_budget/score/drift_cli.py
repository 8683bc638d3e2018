"""``grpo-budget drift``: the drift rule's job (:func:`grpo_budget.score.drift.rescore`), its parser kept out of
:mod:`grpo_budget.cli` (which stays short, and imports no stage until a command runs)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def cmd_drift(a: argparse.Namespace) -> None:
    from grpo_budget.config.settings import Adaptive, Generation
    from grpo_budget.score.drift import rescore

    adaptive = a.settings.get("adaptive")
    rescore(a.model, a.scores, a.subset, a.manifest, a.out, Generation.from_dict(a.settings, "scoring"),
            None if adaptive is None else Adaptive.from_dict(adaptive), a.dataset, a.cuts)


def add_parser(sub: argparse._SubParsersAction, json_arg: Callable[[str], dict]) -> None:
    """The ``drift`` subcommand, on the CLI's subparsers (``json_arg``: its JSON argument type)."""
    s = sub.add_parser("drift", help="an arm's subset scored again by its trained model (the scoring's own draws)")
    s.add_argument("--model", required=True, help="the base model (hub id or local folder)")
    s.add_argument("--scores", required=True, help="the base model's score table of the pool")
    s.add_argument("--subset", required=True, help="the arm's subset")
    s.add_argument("--manifest", default=None, help="the arm's training manifest: its last checkpoint is scored "
                   "(absent: the base model replayed)")
    s.add_argument("--settings", type=json_arg, required=True, help="the score job's sampling and engine settings")
    s.add_argument("--dataset", type=json_arg, required=True)
    s.add_argument("--cuts", type=json_arg, default=None, help="adaptive scoring's cuts, as the score job had them")
    s.add_argument("--out", required=True)
    s.set_defaults(func=cmd_drift)
