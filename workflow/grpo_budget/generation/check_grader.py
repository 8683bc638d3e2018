"""check-grader: grade each item's reference solution against its own gold answer.

A grader that cannot recognise the data set's own worked solutions (or that
accepts them against a wrong answer) would silently corrupt pass rates, rewards
and evaluations.  ``check(frame)`` grades every item's ``solution`` as if it
were a completion; ``check(frame, perturb=True)`` first replaces each gold answer
by a wrong one of the same type and expects rejection.

CLI (wired by ``grpo-budget check-grader``)::

    grpo-budget check-grader --dataset math --data-files ../shared/data/math/train.jsonl
    grpo-budget check-grader --dataset math --data-files ... --perturb
    grpo-budget check-grader --dataset mbpp --data-files ../shared/data/mbpp/mbpp.jsonl --split all
    grpo-budget check-grader --configfile my.yaml --dataset wordprobs     # a config's dataset, as the workflow reads it

Code items (mbpp, humaneval) run their reference solution with their tests in the sandbox; with ``--perturb``
the reference is altered to be wrong (every function it defines then returns None) and must fail.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from typing import Sequence

import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.generation.extract import normalize_option, parse_number
from grpo_budget.generation import choices, codegrade, custom_rewards
from grpo_budget.generation.grade_cli import config_dataset
from grpo_budget.generation.grading import grade_many
from grpo_budget.prepare.benchmarks import BENCHMARKS
from grpo_budget.prepare.loaders import load_benchmark

__all__ = ["check", "format_report", "perturb_answer", "main"]

_LETTERS = "ABCDEFG"


def _format_number(x: float) -> str:
    if x == int(x):
        return str(int(x))
    return repr(x)


def perturb_answer(gold: str, answer_type: str, rng: random.Random, n_options: int | None = None) -> str:
    """A WRONG answer of the same type as ``gold``."""
    gold = "" if gold is None else str(gold)
    if answer_type == "number":
        value = parse_number(gold)
        if value is None:
            return gold + "1"
        offset = rng.choice([-1, 1]) * rng.randint(1, 9)
        return _format_number(value + offset)
    if answer_type == "option":
        letter = normalize_option(gold)
        choices = _LETTERS[: n_options] if n_options else _LETTERS
        others = [c for c in choices if c != letter] or [c for c in _LETTERS if c != letter]
        return f"({rng.choice(others)})"
    # math: change one digit of the answer (every numeric value changes), or
    # add 1 when it has no digit (symbolic answers such as \pi or x^2+y^2).
    digits = [m.start() for m in re.finditer(r"\d", gold)]
    if digits:
        pos = rng.choice(digits)
        # a different non-zero digit: no leading zeros, no division by zero
        new = rng.choice([d for d in "123456789" if d != gold[pos]])
        return gold[:pos] + new + gold[pos + 1 :]
    return "(" + gold + ")+1" if gold else "1"


def plain(gold: str, answer_type: str) -> list[str]:
    """A plain answer written as a model would: boxed, and stated ("The answer is ..."); none for code."""
    if answer_type == "code":
        return []
    shown = choices.parse_gold(gold)[0] if answer_type == "choice" else gold
    return [f"\\boxed{{{shown}}}", f"The answer is {shown}."]


def check(
    frame: pd.DataFrame,
    mode: str = "lenient",
    perturb: bool = False,
    seed: int = 0,
    show: int = 5,
    pattern: str | None = None,
    function: str | None = None,
) -> dict:
    """Grade ``solution`` against ``answer`` for every item of ``frame``; an item without a solution has its plain
    gold answer graded as two completions, ``\\boxed{gold}`` and ``The answer is gold.`` (both must pass; with
    ``perturb``, neither may).

    ``pattern`` and ``function`` (a dataset's ``grading.function``, given the item's columns with ``answer`` perturbed
    where ``perturb``) grade as the workflow does. Returns ``{n, accuracy, correct, format_failures, skipped,
    failures, ...}``; ``failures`` lists the first ``show`` items that failed the check (without perturbation:
    graded wrong; with perturbation: graded right against the wrong gold) as ``{id, gold, extracted, format_ok}``.
    """
    rng = random.Random(seed)
    rows, skipped = [], 0
    for row in frame.itertuples(index=False):
        solution = getattr(row, "solution", None)
        answer_type, gold = row.answer_type, str(row.answer)
        has = not (solution is None or (isinstance(solution, float) and pd.isna(solution)) or not str(solution).strip())
        completions = [str(solution)] if has else plain(gold, answer_type)
        if not completions or row.answer is None or (isinstance(row.answer, float) and pd.isna(row.answer)):
            skipped += 1
            continue
        if perturb and answer_type == "code":
            completions = [codegrade.perturbed(c) for c in completions]  # altered to be wrong, against its tests
        elif perturb and answer_type == "choice":
            label, options = choices.parse_gold(gold)
            gold = choices.gold(rng.choice([o for o in options if o != label]), list(options.items()))
        elif perturb:
            n_options = getattr(row, "n_objects", None)
            n_options = int(n_options) if n_options is not None and not pd.isna(n_options) else None
            gold = perturb_answer(gold, answer_type, rng, n_options)
        rows.append((row.id, answer_type, completions, gold, str(row.answer)))
    grades: list = [None] * len(rows)
    if function:
        kept = frame[frame["id"].isin([r[0] for r in rows])].set_index("id").loc[[r[0] for r in rows]].reset_index()
        kept = kept.assign(answer=[r[3] for r in rows])
        grades = custom_rewards.grade_items(function, kept, list(kept["prompt"]), [r[2] for r in rows])
    else:
        for kind in dict.fromkeys(r[1] for r in rows):  # one grade_many per answer type: code runs in parallel
            at = [i for i, r in enumerate(rows) if r[1] == kind]
            flat = grade_many([c for i in at for c in rows[i][2]], [rows[i][3] for i in at for _ in rows[i][2]],
                              kind, mode=mode, pattern=pattern)
            for i in at:
                grades[i], flat = flat[:len(rows[i][2])], flat[len(rows[i][2]):]
    n, correct, format_failures, n_failing, failing = len(rows), 0, 0, 0, []
    for (item, kind, _, gold, original), gs in zip(rows, grades):
        right = any(g.correct for g in gs) if perturb else all(g.correct for g in gs)
        correct += right
        format_failures += not all(g.format_ok for g in gs)
        if right if perturb else not right:
            n_failing += 1
            g = next((g for g in gs if g.correct == perturb), gs[0])
            if len(failing) < show:
                failing.append({"id": item, "gold": gold if kind != "code" else "(tests)",
                                "original_gold": original if perturb and kind != "code" else None,
                                "extracted": g.reason or g.extracted, "format_ok": g.format_ok})
    return {
        "n": n,
        "correct": correct,
        "accuracy": correct / n if n else float("nan"),
        "format_failures": format_failures,
        "n_failing": n_failing,
        "skipped": skipped,
        "mode": mode,
        "perturb": perturb,
        "failures": failing,
    }


def format_report(result: dict) -> str:
    what = "accepted against a WRONG gold" if result.get("perturb") else "graded correct"
    lines = [
        f"{result['n']} items ({result.get('mode', '?')} mode"
        + (", perturbed golds" if result.get("perturb") else "")
        + f"): {result['correct']} {what} = {100 * result['accuracy']:.2f}%",
        f"format failures (no answer extracted): {result['format_failures']}",
    ]
    if result.get("skipped"):
        lines.append(f"skipped (no gold answer, or code without a reference solution): {result['skipped']}")
    if result["failures"]:
        lines.append(f"first {len(result['failures'])} of {result.get('n_failing', '?')} failing items:")
        for f in result["failures"]:
            orig = f" (original {f['original_gold']!r})" if f.get("original_gold") is not None else ""
            lines.append(
                f"  {f['id']}: gold {f['gold']!r}{orig}, extracted {f['extracted']!r}"
                + ("" if f["format_ok"] else " [format failure]")
            )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="grpo-budget check-grader",
        description="Grade each item's reference solution (else its plain gold answer, boxed and stated) against its "
                    "gold answer.",
    )
    p.add_argument("--dataset", required=True,
                   help=f"a benchmark ({', '.join(BENCHMARKS)}), or with --configfile one of that config's datasets")
    p.add_argument("--configfile", help="read the dataset from this config: its files, mapping, ids and grading, as "
                   "the workflow reads them")
    p.add_argument("--data-files", nargs="+", help="local data files (default: the hub copy)")
    p.add_argument("--format", help="json/jsonl/parquet/csv (default: from the file names)")
    p.add_argument("--hub-id", help="a hub copy other than the default")
    p.add_argument("--field", action="append", default=[], metavar="KEY=COLUMN",
                   help="map a field to the copy's column, e.g. --field question=problem (repeatable)")
    p.add_argument("--split", choices=["pool", "test", "all"], default="all")
    p.add_argument("--mode", choices=["lenient", "strict", "paper"], default=None,
                   help="grading mode (default: the config's, else lenient)")
    p.add_argument("--perturb", action="store_true", help="replace each gold by a wrong one; expect rejection")
    p.add_argument("--min-accuracy", type=float, default=0.99, help="fail below this (default 0.99)")
    p.add_argument(
        "--max-accuracy", type=float, default=0.01, help="with --perturb: fail above this (default 0.01)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--show", type=int, default=5)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    grading = {"mode": args.mode or "lenient", "pattern": None, "function": None}
    if args.configfile:
        if args.data_files or args.field or args.hub_id or args.format:
            raise UserError("--configfile reads the dataset's files and fields from the config; drop --data-files, "
                            "--field, --hub-id and --format (or drop --configfile)")
        frames, grading = config_dataset(args.configfile, args.dataset)
        grading["mode"] = args.mode or grading["mode"]
    else:
        if args.dataset not in BENCHMARKS:
            raise UserError(f"--dataset {args.dataset}: not a benchmark; allowed: {', '.join(BENCHMARKS)}, or a "
                            "dataset of a config with --configfile CONFIG")
        spec: dict = {}
        for mapping in args.field:
            key, sep, column = mapping.partition("=")
            if not sep or not key or not column:
                raise UserError(f"--field {mapping!r}: expected KEY=COLUMN, e.g. question=problem")
            spec.setdefault("fields", {})[key] = column
        if args.data_files:
            spec["data_files"] = args.data_files[0] if len(args.data_files) == 1 else list(args.data_files)
        if args.format:
            spec["format"] = args.format
        if args.hub_id:
            spec["hub_id"] = args.hub_id
        frames = load_benchmark(args.dataset, spec, args.seed)
    roles = ["pool", "test"] if args.split == "all" else [args.split]
    chosen = [frames[r] for r in roles if r in frames]
    if not chosen:
        print(f"no {args.split} items in {args.dataset}", file=sys.stderr)
        return 2
    frame = pd.concat(chosen, ignore_index=True)
    result = check(frame, mode=grading["mode"], perturb=args.perturb, seed=args.seed, show=args.show,
                   pattern=grading["pattern"], function=grading["function"])
    print(f"check-grader {args.dataset}")
    print(format_report(result))
    if result["n"] == 0:
        print("no items with a gold answer to check", file=sys.stderr)
        return 2
    if args.perturb:
        if result["accuracy"] > args.max_accuracy:
            print(f"FAIL: {100 * result['accuracy']:.2f}% accepted > {100 * args.max_accuracy:.2f}% allowed")
            return 1
    elif result["accuracy"] < args.min_accuracy:
        print(f"FAIL: {100 * result['accuracy']:.2f}% < {100 * args.min_accuracy:.2f}% required")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
