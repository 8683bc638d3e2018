"""``grpo-budget grade``: grade a JSON Lines file of completions (``{"id": ..., "completion": ...}``, as a model
writes them) against a benchmark's items with the grader the workflow uses, into a CSV of ``id, score, reason``.

    grpo-budget grade --dataset mbpp --data-files ../shared/data/mbpp/mbpp.jsonl --completions c.jsonl --out g.csv
    grpo-budget grade --configfile my.yaml --dataset mcq --completions c.jsonl --out g.csv   # a config's dataset
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.config import schema
from grpo_budget.experiment.config import load
from grpo_budget.generation import custom_rewards
from grpo_budget.generation.grading import MODES, Grade, grade_many
from grpo_budget.io import json_lines
from grpo_budget.prepare.benchmarks import BENCHMARKS
from grpo_budget.prepare.loaders import load_benchmark
from grpo_budget.prepare.splits import build


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


def config_dataset(configfile: str, name: str) -> tuple[dict[str, pd.DataFrame], dict]:
    """A config's dataset as the workflow prepares it (its files, mapping, ids, filter) and its grading settings."""
    cfg = load(configfile)
    if name not in cfg["datasets"]:
        raise UserError(f"--dataset {name}: {configfile} has no such dataset; allowed: {', '.join(cfg['datasets'])}")
    ds = cfg["datasets"][name]
    grading = schema.fill(("datasets", "*", "grading"), ds.get("grading", {}))
    return build(ds), {"mode": grading["mode"], "pattern": grading["pattern"], "function": grading.get("function")}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="grpo-budget grade", description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True,
                   help=f"a benchmark ({', '.join(BENCHMARKS)}), or with --configfile one of that config's datasets")
    p.add_argument("--configfile", help="grade against this config's dataset: its files, mapping, ids and grading")
    p.add_argument("--data-files", nargs="+", help="the benchmark's local data files (without --configfile)")
    p.add_argument("--completions", required=True, help='JSON lines: {"id": ITEM_ID, "completion": TEXT}')
    p.add_argument("--out", required=True, help="the CSV to write (id, score, reason)")
    p.add_argument("--mode", choices=MODES, default=None, help="grading mode (default: the config's, else lenient)")
    a = p.parse_args(argv)
    if a.configfile:
        frames, grading = config_dataset(a.configfile, a.dataset)
        where = f"dataset {a.dataset} of {a.configfile}"
    else:
        if a.dataset not in BENCHMARKS or not a.data_files:
            raise UserError(f"--dataset {a.dataset}: give a benchmark ({', '.join(BENCHMARKS)}) with --data-files, or "
                            "a dataset of a config with --configfile CONFIG")
        spec = {"data_files": a.data_files[0] if len(a.data_files) == 1 else list(a.data_files)}
        frames, grading = load_benchmark(a.dataset, spec, 0), {"mode": "lenient", "pattern": None, "function": None}
        where = f"{a.dataset} in {', '.join(a.data_files)}"
    mode = a.mode or grading["mode"]
    items = pd.concat(frames.values(), ignore_index=True).drop_duplicates("id")
    comps = read_completions(a.completions)
    unknown = sorted(set(comps["id"]) - set(items["id"].astype(str)))
    if unknown:
        raise UserError(f"{a.completions}: {len(unknown)} id(s) are not items of {where}, e.g. {unknown[0]!r} (ids "
                        f"look like {items['id'].iloc[0]!r})")
    items = items.assign(id=items["id"].astype(str))
    if grading["function"]:  # the dataset's own function, given each completion's item row
        rows = items.set_index("id").loc[comps["id"]].reset_index()
        grades = [g[0] for g in custom_rewards.grade_items(grading["function"], rows, list(rows["prompt"]),
                                                           [[c] for c in comps["completion"]])]
        scores, reasons = pd.Series([int(g.correct) for g in grades]), pd.Series([reason(g) for g in grades])
        merged = comps
    else:
        merged = comps.merge(items[["id", "answer", "answer_type"]], on="id", how="left")
        scores = pd.Series(0, index=merged.index)
        reasons = pd.Series("", index=merged.index)
        for kind, part in merged.groupby("answer_type", sort=False):
            grades = grade_many(list(part["completion"]), list(part["answer"].astype(str)), kind, mode,
                                grading["pattern"])
            scores[part.index] = [int(g.correct) for g in grades]
            reasons[part.index] = [reason(g) for g in grades]
    pd.DataFrame({"id": merged["id"], "score": scores, "reason": reasons}).to_csv(a.out, index=False)
    print(f"{a.dataset}: {int(scores.sum())} of {len(merged)} completions right; wrote {a.out}")
    return 0
