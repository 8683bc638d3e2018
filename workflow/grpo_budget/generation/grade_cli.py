"""``grpo-budget grade``: grade a JSON Lines file of completions (``{"id": ..., "completion": ...}``, as a model
writes them) against a benchmark's items with the grader the workflow uses, into a CSV of ``id, score, reason``.

    grpo-budget grade --dataset mbpp --data-files ../shared/data/mbpp/mbpp.jsonl --completions c.jsonl --out g.csv
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.generation.grading import MODES, Grade, grade_many
from grpo_budget.io import json_lines
from grpo_budget.prepare.benchmarks import BENCHMARKS
from grpo_budget.prepare.loaders import load_benchmark


def read_completions(path: str | Path) -> pd.DataFrame:
    """The completions file: one JSON object with ``id`` and ``completion`` per line."""
    rows = []
    for n, obj in json_lines(path):
        if "id" not in obj or not isinstance(obj.get("completion"), str):
            raise UserError(f"{path}:{n}: each line needs an id and a completion (a string)")
        rows.append({"id": str(obj["id"]), "completion": obj["completion"]})
    return pd.DataFrame(rows, columns=["id", "completion"])


def reason(g: Grade) -> str:
    """Why a completion scored 0 ('' for a 1)."""
    if g.correct:
        return ""
    if g.reason:
        return g.reason
    return "no answer could be read" if not g.format_ok else f"answer {g.extracted} is wrong"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="grpo-budget grade", description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True, choices=list(BENCHMARKS))
    p.add_argument("--data-files", nargs="+", required=True, help="the benchmark's local data files")
    p.add_argument("--completions", required=True, help='JSON lines: {"id": ITEM_ID, "completion": TEXT}')
    p.add_argument("--out", required=True, help="the CSV to write (id, score, reason)")
    p.add_argument("--mode", choices=MODES, default="lenient")
    a = p.parse_args(argv)
    spec = {"data_files": a.data_files[0] if len(a.data_files) == 1 else list(a.data_files)}
    items = pd.concat(load_benchmark(a.dataset, spec, 0).values(), ignore_index=True).drop_duplicates("id")
    comps = read_completions(a.completions)
    unknown = sorted(set(comps["id"]) - set(items["id"]))
    if unknown:
        raise UserError(f"{a.completions}: {len(unknown)} id(s) are not items of {a.dataset} in {', '.join(a.data_files)}"
                        f", e.g. {unknown[0]!r} (ids look like {items['id'].iloc[0]!r})")
    merged = comps.merge(items[["id", "answer", "answer_type"]], on="id", how="left")
    scores = pd.Series(0, index=merged.index)
    reasons = pd.Series("", index=merged.index)
    for kind, part in merged.groupby("answer_type", sort=False):
        grades = grade_many(list(part["completion"]), list(part["answer"].astype(str)), kind, a.mode)
        scores[part.index] = [int(g.correct) for g in grades]
        reasons[part.index] = [reason(g) for g in grades]
    pd.DataFrame({"id": merged["id"], "score": scores, "reason": reasons}).to_csv(a.out, index=False)
    print(f"{a.dataset}: {int(scores.sum())} of {len(merged)} completions right; wrote {a.out}")
    return 0
