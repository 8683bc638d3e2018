"""The ``grpo-budget`` subcommands a user runs (:mod:`grpo_budget.cli` holds the ones the rules run): the plans,
checks before a first run, model fetching, recommendations, and the tools passed through to their own module."""

from __future__ import annotations

import argparse
from pathlib import Path

from grpo_budget.errors import UserError


def cmd_fetch_models(a: argparse.Namespace) -> None:
    from grpo_budget.experiment.config import load
    from grpo_budget.hub import fetch_into, fetched, folder_name

    cfg = load(a.configfile)
    if not cfg["model_store"]:
        raise UserError(f"{a.configfile}: model_store is not set, so there is nowhere to fetch models into")
    for name, spec in cfg["models"].items():
        if fetched(cfg, name):
            store = Path(cfg["model_store"])
            try:
                print(fetch_into(spec["path"], store / ".partial" / folder_name(spec["path"]),
                                 store / folder_name(spec["path"])))
            except UserError as e:
                raise UserError(f"model {name}: {e}") from None


def cmd_doctor(a: argparse.Namespace) -> None:
    from grpo_budget.cluster import doctor
    from grpo_budget.experiment.config import load

    checks = doctor.run(load(a.configfile))
    print("\n".join(c.line() for c in checks))
    failed = sum(c.status == "FAIL" for c in checks)
    if failed:
        raise SystemExit(1)


def cmd_unlock(a: argparse.Namespace) -> None:
    from grpo_budget.lock import unlock

    print("\n".join(unlock(a.results)))


def cmd_validate_config(a: argparse.Namespace) -> None:
    from grpo_budget.experiment.config import load

    for path in a.configs:
        load(path)
        print(f"{path}: ok")


def cmd_plan(a: argparse.Namespace) -> None:
    from grpo_budget.cluster import cost, memory, memory_plan
    from grpo_budget.cluster.jobs import card
    from grpo_budget.experiment.config import load

    cfg = load(a.configfile)
    for item in a.config or []:
        key, _, value = item.partition("=")
        if key != "results" or not value:
            raise UserError(f"--config {item}: only results=DIR can be set here; edit the config file for the rest")
        cfg["results"] = value
    if a.calibrate_from:
        cfg["cost"] = dict(cfg["cost"], calibrate_from=list(cfg["cost"]["calibrate_from"]) + a.calibrate_from)
    if a.gpu_memory_gib:
        cfg["gpu"] = dict(cfg["gpu"], memory_gib=a.gpu_memory_gib)
    budgets = memory_plan.check_config(cfg)
    if budgets:
        print(memory.render(budgets, card(cfg), cfg["device"]) + "\n")
    text, path = cost.write_plan(cfg, a.parallel)
    print(text + f"\nwritten to {path} (per job: {path.with_suffix('.csv')})")


def add_user_commands(sub) -> None:
    """The subcommands a user runs: plans, checks, model fetching, and the tools passed through to their module."""
    s = sub.add_parser("plan", help="the memory plan (device cuda) and the cost plan: jobs, tokens, GPU-hours, wall time")
    s.add_argument("--configfile", default="config.yaml", help="the experiment config (default: the embedded one)")
    s.add_argument("--config", nargs="*", metavar="results=DIR", help="the results folder, as with snakemake")
    s.add_argument("--calibrate-from", nargs="*", default=[], metavar="DIR",
                   help="results folders of earlier runs on the same machines (added to cost.calibrate_from)")
    s.add_argument("--parallel", type=int, default=None, help="jobs at a time, for the wall-time estimate")
    s.add_argument("--gpu-memory-gib", type=float, default=None, help="the card's memory (replaces gpu.memory_gib)")
    s.set_defaults(func=cmd_plan)

    s = sub.add_parser("fetch-models", help="download every hub model of a config into its model_store (login node)")
    s.add_argument("--configfile", required=True)
    s.set_defaults(func=cmd_fetch_models)

    s = sub.add_parser("doctor", help="check a cluster before a first run: CUDA, GPUs, SLURM, plugin, models, memory")
    s.add_argument("--configfile", default="config.yaml", help="the experiment config (default: the embedded one)")
    s.set_defaults(func=cmd_doctor)

    s = sub.add_parser("unlock", help="remove a results folder's locks left by runs that are gone (another node's)")
    s.add_argument("results", help="the results folder")
    s.set_defaults(func=cmd_unlock)

    s = sub.add_parser("validate-config", help="check config files against the schema")
    s.add_argument("configs", nargs="+")
    s.set_defaults(func=cmd_validate_config)

    sub.add_parser("check-grader", help="grade reference solutions as completions (see --help)", add_help=False)
    sub.add_parser("grade", help="grade a JSON lines file of completions against a benchmark -> CSV", add_help=False)
    sub.add_parser("pilot", help="before the grid: does the pool give GRPO a signal? (see --help)", add_help=False)
    sub.add_parser("recommend", help="after the score job: a model's arms ranked before training, validated",
                   add_help=False)
    sub.add_parser("install-profile", help="link profiles/slurm into ~/.config/snakemake", add_help=False)
    sub.add_parser("launch", help="run the Snakemake controller itself as a SLURM job (submitit)", add_help=False)
