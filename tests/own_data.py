"""A researcher's own data files in the shapes of docs/your-own-data.md (issue 55), written by the tests: word
problems ``{uid, prompt, solution: "... The answer is 30.", kind}``, multiple choice ``{qid, question, options: [4
strings], answer: "B"}`` and MMLU's integer-indexed multiple choice ``{question, subject, choices, answer: 1}``."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pandas as pd
import yaml

NAMES = ["Sam", "Ada", "Lee", "Mia", "Bo", "Kim", "Ana", "Tom"]
THINGS = ["apples", "pens", "books", "cards", "shells", "coins"]
KINDS = {"addition": lambda a, b: a + b, "subtraction": lambda a, b: a - b, "multiplication": lambda a, b: a * b}


def word_problems(n: int = 200, seed: int = 0) -> list[dict]:
    rng, rows, seen = random.Random(seed), [], set()
    while len(rows) < n:
        kind = rng.choice(list(KINDS))
        a, b = rng.randint(2, 40), rng.randint(2, 12)
        who, what = rng.choice(NAMES), rng.choice(THINGS)
        if kind == "subtraction":
            a += b
        question = {"addition": f"{who} has {a} {what} and gets {b} more. How many {what} does {who} have?",
                    "subtraction": f"{who} has {a} {what} and gives away {b}. How many {what} are left?",
                    "multiplication": f"{who} has {a} boxes of {b} {what}. How many {what} is that?"}[kind]
        if question in seen:
            continue
        seen.add(question)
        answer = KINDS[kind](a, b)
        sign = {"addition": "+", "subtraction": "-", "multiplication": "*"}[kind]
        rows.append({"uid": f"wp-{len(rows):04d}", "prompt": question,
                     "solution": f"{who} has {a} {sign} {b} = {answer} {what}. The answer is {answer}.", "kind": kind})
    return rows


def multiple_choice(n: int = 200, seed: int = 1) -> list[dict]:
    rng, rows, seen = random.Random(seed), [], set()
    while len(rows) < n:
        a, b = rng.randint(2, 60), rng.randint(2, 60)
        if (a, b) in seen:
            continue
        seen.add((a, b))
        right = a + b
        wrong = rng.sample([right + d for d in (-3, -2, -1, 1, 2, 3, 10)], 3)
        options = wrong + [right]
        rng.shuffle(options)
        rows.append({"qid": f"q{len(rows)}", "question": f"What is {a} + {b}?", "options": [str(o) for o in options],
                     "answer": "ABCD"[options.index(right)]})
    return rows


def mmlu_style(n: int = 120, seed: int = 2) -> list[dict]:
    rng, rows, seen = random.Random(seed), [], set()
    while len(rows) < n:
        a, b = rng.randint(2, 15), rng.randint(2, 15)
        if (a, b) in seen:
            continue
        seen.add((a, b))
        right = a * b
        options = [right, right + a, right - b, right + 1]
        rng.shuffle(options)
        rows.append({"question": f"What is {a} times {b}?", "subject": rng.choice(["arithmetic", "algebra"]),
                     "choices": [str(o) for o in options], "answer": options.index(right)})
    return rows


def write_jsonl(rows: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_all(folder: Path, n: int = 200) -> dict[str, Path]:
    """The three files in ``folder``: wordprobs.jsonl, mcq.jsonl and mmlu.parquet (with a test file beside it)."""
    folder.mkdir(parents=True, exist_ok=True)
    mmlu = mmlu_style(max(12, n * 3 // 5))
    cut = len(mmlu) * 3 // 4
    pd.DataFrame(mmlu[:cut]).to_parquet(folder / "mmlu-train.parquet")
    pd.DataFrame(mmlu[cut:]).to_parquet(folder / "mmlu-test.parquet")
    return {"wordprobs": write_jsonl(word_problems(n), folder / "wordprobs.jsonl"),
            "mcq": write_jsonl(multiple_choice(n), folder / "mcq.jsonl"),
            "mmlu_train": folder / "mmlu-train.parquet", "mmlu_test": folder / "mmlu-test.parquet"}


DOCS = Path(__file__).resolve().parents[1] / "docs" / "your-own-data.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def docs_blocks(language: str) -> list[str]:
    """The fenced blocks of docs/your-own-data.md in ``language``."""
    return [body for lang, body in FENCE.findall(DOCS.read_text()) if lang == language]


def docs_config() -> dict:
    """The page's config of the three shapes, as written there."""
    (text,) = [b for b in docs_blocks("yaml") if "wordprobs:" in b and "models:" in b]
    return yaml.safe_load(text)


def docs_grader() -> tuple[str, str]:
    """(the file name, the code) of the page's grading function (`# NAME.py, ...` on its first line)."""
    (code,) = [b for b in docs_blocks("python") if "def " in b]
    return code.splitlines()[0].split()[1].rstrip(","), code


def experiment(folder: Path, model: Path | None = None, n: int = 200) -> Path:
    """The docs page's setup in ``folder``: its data files, its config (EXPERIMENT.yaml) and, where given, a model
    folder copied in as my-model/. Returns the config's path."""
    import shutil

    write_all(folder / "data", n)
    if model is not None:
        shutil.copytree(model, folder / "my-model", dirs_exist_ok=True)
    path = folder / "EXPERIMENT.yaml"
    path.write_text(yaml.safe_dump(docs_config(), sort_keys=False))
    return path
