"""The built-in BBH "tracking shuffled objects" generator.

Answers are checked by an independent solver written here: it reads the
generated prompt text with its own regexes and re-simulates the swaps; it does
not use the module's ``simulate``.  The same solver is first validated on the
750 real BBH items, and the module's ``render`` must reproduce every real BBH
question text character for character.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import missing_data

from grpo_budget.generation.grading import grade
from grpo_budget.prepare.shuffled_objects import NAMES, TEMPLATES, generate, render

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
BBH_FILES = [DATA / "bbh" / f"tracking_shuffled_objects_{w}_objects.json" for w in ("three", "five", "seven")]

_VERB = r"(?:has a|is playing|is dancing with|gets)"
_SWAP_RE = re.compile(r"(?:First|Then|Finally), (\w+) and (\w+) (?:swap|trade|switch)")
_ASKED_RE = re.compile(r"At the end of the \w+, (\w+) (?:has|is)")
_OPTION_RE = re.compile(r"^\(([A-G])\) (.+)$", re.MULTILINE)


def solve(prompt: str) -> tuple[str, dict]:
    """Independently parse a question and return ("(X)", parsed parts)."""
    first, second, rest = prompt.split("\n", 2)
    assert rest.startswith("Options:\n")
    options = _OPTION_RE.findall(rest)
    holding = {}
    for letter, obj in options:
        m = re.search(r"(\w+) " + _VERB + " " + re.escape(obj) + r"(?:,|\.$)", first)
        assert m, (obj, first)
        holding[m.group(1)] = letter
    assert len(holding) == len(options)
    swaps = _SWAP_RE.findall(second)
    for a, b in swaps:
        holding[a], holding[b] = holding[b], holding[a]
    asked = _ASKED_RE.search(second).group(1)
    people = re.match(r"^(.*?) are ", first).group(1).replace(", and ", ", ").replace(" and ", ", ").split(", ")
    return f"({holding[asked]})", {
        "people": people,
        "objects": [obj for _, obj in options],
        "swaps": swaps,
        "asked": asked,
    }


def _real_items():
    missing = [p for p in BBH_FILES if not p.exists()]
    if missing:
        missing_data(f"real BBH data not found at {DATA}/bbh (needs ../shared/data next to the project)")
    items = []
    for p in BBH_FILES:
        items.extend(json.loads(p.read_text())["examples"])
    return items


def test_independent_solver_matches_real_bbh_targets():
    items = _real_items()
    assert len(items) == 750
    wrong = [it for it in items if solve(it["input"])[0] != it["target"]]
    assert not wrong


def test_render_reproduces_real_bbh_wording_exactly():
    items = _real_items()
    for it in items:
        _, parts = solve(it["input"])
        templates = [k for k, t in TEMPLATES.items() if t.progress in it["input"]]
        assert len(templates) == 1, it["input"]
        n = len(parts["objects"])
        assert parts["people"] == list(NAMES[:n])
        index = {name: i for i, name in enumerate(NAMES)}
        swaps = [(index[a], index[b]) for a, b in parts["swaps"]]
        text = render(templates[0], parts["objects"], swaps, index[parts["asked"]])
        assert text == it["input"]
        assert set(parts["objects"]) <= set(TEMPLATES[templates[0]].vocabulary)


@pytest.mark.parametrize("n_objects", [3, 4, 5, 6, 7])
def test_generated_answers_are_right(n_objects):
    frame = generate(60, n_objects, None, seed=11)
    for row in frame.itertuples():
        answer, parts = solve(row.prompt)
        assert row.answer == answer
        assert len(parts["objects"]) == n_objects == row.n_objects
        assert len(parts["swaps"]) == n_objects == row.n_swaps
        assert parts["people"] == list(NAMES[:n_objects])
        # the worked solution is a completion that grades correct, strictly
        assert grade(row.solution, row.answer, "option", mode="strict").correct


def test_columns_ids_and_options():
    frame = generate(50, [3, 5, 7], n_swaps=4, seed=3)
    assert list(frame.columns[:6]) == ["id", "prompt", "answer", "answer_type", "n_objects", "n_swaps"]
    assert frame["id"].is_unique
    assert set(frame["answer_type"]) == {"option"}
    assert (frame["n_swaps"] == 4).all()
    assert Counter(frame["n_objects"]) == {3: 17, 5: 17, 7: 16}
    for row in frame.itertuples():
        assert re.fullmatch(rf"so-{row.n_objects}-\d+-[0-9a-f]{{8}}", row.id)
        letters = [m.group(1) for m in _OPTION_RE.finditer(row.prompt)]
        assert letters == list("ABCDEFG"[: row.n_objects])
        assert re.fullmatch(r"\([A-G]\)", row.answer)
        answer, parts = solve(row.prompt)
        assert answer == row.answer and len(parts["swaps"]) == 4
        for a, b in zip(parts["swaps"], parts["swaps"][1:]):
            assert set(a) != set(b)  # as in BBH: never the same pair twice in a row


def test_deterministic_and_prefix_stable():
    a = generate(40, [3, 7], None, seed=5)
    b = generate(40, [3, 7], None, seed=5)
    assert a.equals(b)
    c = generate(10, [3, 7], None, seed=5)
    assert c.equals(a.head(10))
    d = generate(40, [3, 7], None, seed=6)
    assert (d["prompt"] != a["prompt"]).sum() > 30


def test_answers_and_templates_are_spread():
    frame = generate(700, 7, None, seed=0)
    letters = Counter(frame["answer"])
    assert set(letters) == {f"({x})" for x in "ABCDEFG"}
    assert min(letters.values()) > 50
    assert set(frame["template"]) == set(TEMPLATES)


def test_arguments_are_validated():
    with pytest.raises(ValueError):
        generate(3, 2, None, 0)
    with pytest.raises(ValueError):
        generate(3, 8, None, 0)
    with pytest.raises(ValueError):
        generate(3, 3, 0, 0)
    assert len(generate(0, 3, None, 0)) == 0
    one = generate(5, 3, 1, 0)
    for row in one.itertuples():
        assert solve(row.prompt)[0] == row.answer
