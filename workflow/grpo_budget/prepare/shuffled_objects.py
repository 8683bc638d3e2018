"""A seeded generator of BIG-Bench-Hard "tracking shuffled objects" items.

The items use the same five story templates (balls, white-elephant gifts, soccer
positions, square-dance partners, books), the same people (Alice .. Gertrude),
the same ten-object vocabularies (including BBH's quirk that three of the
"presents" are balls), the same sentence wording and the same ``(A)``..``(G)``
option layout as the real BBH files: options list the objects in the order they
were first handed out, swaps are "First, ... Then, ... Finally, ..." and no
pair swaps twice in a row.  With ``n_swaps=None`` an item has as many swaps as
objects, as in BBH.

``generate(n_items, n_objects, n_swaps, seed)`` returns a DataFrame with
``id, prompt, answer, answer_type, n_objects, n_swaps`` plus ``template`` and
``solution`` (a worked chain of thought in the BBH cot-prompt style ending in
``\\boxed{(X)}``).  Item ``i`` depends only on ``(seed, n_objects, n_swaps, i)``,
so a larger ``n_items`` extends a smaller run without changing its items.
"""

from __future__ import annotations

import hashlib
import numbers
import random
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

__all__ = ["NAMES", "TEMPLATES", "Template", "generate", "render", "simulate", "solution_text"]

NAMES = ("Alice", "Bob", "Claire", "Dave", "Eve", "Fred", "Gertrude")
LETTERS = "ABCDEFG"
MIN_OBJECTS, MAX_OBJECTS = 3, len(NAMES)


@dataclass(frozen=True)
class Template:
    key: str
    intro: str  # "<names> are playing a game. ...: " (before the assignments)
    assign: str  # "{name} has a {obj}"
    progress: str  # sentence opening the swaps
    swap: str  # "{a} and {b} swap balls"
    end: str  # "At the end of the game, {name} has the"
    final: str  # "At the end of the game, {name} has the {obj}." (cot)
    vocabulary: tuple[str, ...]
    short: dict | None = None  # object -> name used in the cot state lines


TEMPLATES: dict[str, Template] = {
    t.key: t
    for t in [
        Template(
            key="balls",
            intro="{names} are playing a game. At the start of the game, they are each holding a ball: ",
            assign="{name} has a {obj}",
            progress="As the game progresses, pairs of players trade balls.",
            swap="{a} and {b} swap balls",
            end="At the end of the game, {name} has the",
            final="At the end of the game, {name} has the {obj}.",
            vocabulary=(
                "black ball", "blue ball", "brown ball", "green ball", "orange ball",
                "pink ball", "purple ball", "red ball", "white ball", "yellow ball",
            ),
        ),
        Template(
            key="gifts",
            intro=(
                "{names} are holding a white elephant gift exchange. At the start of the event, "
                "they are each holding a present of a different color: "
            ),
            assign="{name} has a {obj}",
            progress="As the event progresses, pairs of people swap gifts.",
            swap="{a} and {b} swap their gifts",
            end="At the end of the event, {name} has the",
            final="At the end of the event, {name} has the {obj}.",
            # sic: BBH's gift vocabulary has three balls among the presents
            vocabulary=(
                "black ball", "blue present", "brown present", "green present", "orange ball",
                "pink ball", "purple present", "red present", "white present", "yellow present",
            ),
        ),
        Template(
            key="positions",
            intro=(
                "{names} are on the same team in a soccer match. At the start of the match, "
                "they are each assigned to a position: "
            ),
            assign="{name} is playing {obj}",
            progress="As the game progresses, pairs of players occasionally swap positions.",
            swap="{a} and {b} trade positions",
            end="At the end of the match, {name} is playing",
            final="At the end of the match, {name} is playing {obj}.",
            vocabulary=(
                "benchwarmer", "center midfielder", "cheerleader", "fullback", "goalkeeper",
                "left midfielder", "left winger", "right midfielder", "right winger", "striker",
            ),
        ),
        Template(
            key="partners",
            intro=(
                "{names} are dancers at a square dance. At the start of a song, "
                "they each have a partner: "
            ),
            assign="{name} is dancing with {obj}",
            progress="Throughout the song, the dancers often trade partners.",
            swap="{a} and {b} switch partners",
            end="At the end of the dance, {name} is dancing with",
            final="At the end of the dance, {name} is dancing with {obj}.",
            vocabulary=(
                "Helga", "Izzi", "Jamie", "Karl", "Lola",
                "Melissa", "Ophelia", "Patrick", "Rodrigo", "Sam",
            ),
        ),
        Template(
            key="books",
            intro=(
                "{names} are friends and avid readers who occasionally trade books. "
                "At the start of the semester, they each buy one new book: "
            ),
            assign="{name} gets {obj}",
            progress="As the semester proceeds, they start trading around the new books.",
            swap="{a} and {b} swap books",
            end="At the end of the semester, {name} has",
            final="At the end of the semester, {name} has {obj}.",
            vocabulary=(
                "Catch-22", "Frankenstein", "Hound of the Baskervilles", "Lolita", "Moby Dick",
                "The Fellowship of the Ring", "The Great Gatsby", "The Odyssey", "The Pearl", "Ulysses",
            ),
        ),
    ]
}


def _join(items: Sequence[str]) -> str:
    """English list with a serial comma: "A, B, and C"."""
    items = list(items)
    if len(items) == 1:
        return items[0]
    if len(items) == 2:
        return f"{items[0]} and {items[1]}"
    return ", ".join(items[:-1]) + ", and " + items[-1]


def _check_n_objects(n: int) -> int:
    n = int(n)
    if not MIN_OBJECTS <= n <= MAX_OBJECTS:
        raise ValueError(f"n_objects must be between {MIN_OBJECTS} and {MAX_OBJECTS}, got {n}")
    return n


def render(template: str, objects: Sequence[str], swaps: Sequence[tuple[int, int]], asked: int) -> str:
    """The BBH question text.

    ``objects[i]`` is what person ``i`` (``NAMES[i]``) holds at the start (this is
    also the option order), ``swaps`` are pairs of person indices, ``asked`` is
    the person asked about.
    """
    t = TEMPLATES[template]
    n = len(objects)
    names = NAMES[:n]
    first = t.intro.format(names=_join(names)) + _join(
        [t.assign.format(name=name, obj=obj) for name, obj in zip(names, objects)]
    ) + "."
    sentences = []
    for k, (a, b) in enumerate(swaps):
        if k == 0:
            word = "First"
        elif k == len(swaps) - 1:
            word = "Finally"
        else:
            word = "Then"
        sentences.append(f"{word}, " + t.swap.format(a=names[a], b=names[b]) + ".")
    second = " ".join([t.progress, *sentences, t.end.format(name=names[asked])])
    options = "\n".join(f"({LETTERS[i]}) {obj}" for i, obj in enumerate(objects))
    return f"{first}\n{second}\nOptions:\n{options}"


def simulate(n_objects: int, swaps: Sequence[tuple[int, int]]) -> list[list[int]]:
    """States after each swap: ``states[k][person]`` = index of the object held."""
    holding = list(range(n_objects))
    states = [holding.copy()]
    for a, b in swaps:
        holding[a], holding[b] = holding[b], holding[a]
        states.append(holding.copy())
    return states


def _short(template: str, obj: str) -> str:
    if template in ("balls", "gifts"):
        for suffix in (" ball", " present"):
            if obj.endswith(suffix):
                return obj[: -len(suffix)] if template == "balls" else obj
    return obj


def solution_text(template: str, objects: Sequence[str], swaps: Sequence[tuple[int, int]], asked: int) -> str:
    """A worked answer in the style of BBH's chain-of-thought prompts, boxed."""
    t = TEMPLATES[template]
    n = len(objects)
    names = NAMES[:n]
    states = simulate(n, swaps)

    def state(holding):
        return ", ".join(f"{names[p]}: {_short(template, objects[holding[p]])}" for p in range(n))

    lines = ["Let's think step by step.", f"(0) At the start: {state(states[0])}."]
    for k, (a, b) in enumerate(swaps, start=1):
        lines.append(f"({k}) " + t.swap.format(a=names[a], b=names[b]) + f": {state(states[k])}.")
    answer = states[-1][asked]
    lines.append(
        t.final.format(name=names[asked], obj=objects[answer])
        + f" So the answer is \\boxed{{({LETTERS[answer]})}}."
    )
    return "\n".join(lines)


def _item(seed: int, n_objects: int, n_swaps: int, index: int) -> dict:
    rng = random.Random(f"shuffled-objects/{seed}/{n_objects}/{n_swaps}/{index}")
    template = rng.choice(sorted(TEMPLATES))
    objects = rng.sample(TEMPLATES[template].vocabulary, n_objects)
    swaps: list[tuple[int, int]] = []
    while len(swaps) < n_swaps:
        a, b = rng.sample(range(n_objects), 2)
        if swaps and {a, b} == set(swaps[-1]):
            continue  # BBH never swaps the same pair twice in a row
        swaps.append((a, b))
    asked = rng.randrange(n_objects)
    prompt = render(template, objects, swaps, asked)
    answer = simulate(n_objects, swaps)[-1][asked]
    digest = hashlib.sha1(prompt.encode()).hexdigest()[:8]
    return {
        "id": f"so-{n_objects}-{index}-{digest}",
        "prompt": prompt,
        "answer": f"({LETTERS[answer]})",
        "answer_type": "option",
        "n_objects": n_objects,
        "n_swaps": n_swaps,
        "template": template,
        "solution": solution_text(template, objects, swaps, asked),
    }


PARAMS = ("n_objects", "n_swaps")  # the task's knobs (a dataset's params:)


def generate(
    n_items: int,
    n_objects: int | Sequence[int] = 3,
    n_swaps: int | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """``n_items`` BBH-style items; with several ``n_objects`` they are used in turn.

    ``n_swaps=None`` uses as many swaps as objects (as BBH does).
    """
    if n_items < 0:
        raise ValueError(f"n_items must be >= 0, got {n_items}")
    sizes = [n_objects] if isinstance(n_objects, numbers.Integral) else list(n_objects)
    if not sizes:
        raise ValueError("n_objects must name at least one size")
    sizes = [_check_n_objects(n) for n in sizes]
    if n_swaps is not None and int(n_swaps) < 1:
        raise ValueError(f"n_swaps must be >= 1, got {n_swaps}")
    rows = []
    for i in range(n_items):
        n = sizes[i % len(sizes)]
        rows.append(_item(seed, n, n if n_swaps is None else int(n_swaps), i))
    columns = ["id", "prompt", "answer", "answer_type", "n_objects", "n_swaps", "template", "solution"]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.astype({"n_objects": "int64", "n_swaps": "int64"})
