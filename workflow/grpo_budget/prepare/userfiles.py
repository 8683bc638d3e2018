""":func:`load`: a dataset of the user's own rows (``source: files``) as pool and test frames.

The rows come from ``spec.data_files`` (JSON lines, JSON, Parquet, CSV; a path, a list, a folder, a glob, or a
mapping) or a hub dataset (``spec.hub_id``, ``spec.hub_config``), read as the benchmarks' copies are
(:mod:`grpo_budget.prepare.files`), and map onto the project's columns through ``spec.fields`` and the dataset's
``answer_type`` (:mod:`grpo_budget.prepare.userrows`). Which rows are the pool and which the test set (:func:`roles`):

- ``data_files: {pool: FILE, test: FILE}``: the keys are the roles;
- named splits (a hub dataset's, or ``data_files: {train: ..., test: ...}``): ``spec.splits`` maps roles to them
  (default: pool = train, test = test);
- one set of rows: ``spec.test_size`` items (or ``spec.test_fraction`` of them) held out as the test set, drawn with
  the dataset's ``seed`` after repeated questions are dropped (so no question lands on both sides);
  ``spec.pool_size`` caps the pool (seeded too).

An eval-only dataset takes every row as its test set.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.config.schema import defaults
from grpo_budget.prepare.benchmarks import origin
from grpo_budget.prepare.files import load_source
from grpo_budget.prepare.rows import drop_repeats, excerpt, refuse_long_prompts, refuse_repeated_ids
from grpo_budget.prepare.userrows import FORMS, rows

log = logging.getLogger(__name__)

ROLES = ("pool", "test")
ONE = "the rows"  # the one unnamed split of a file or list of files (datasets names it "train")


def spec_of(ds: dict) -> dict:
    """The dataset's ``spec`` with the schema's defaults of the keys it leaves out."""
    return {**defaults(("datasets", "*", "spec")), **(ds.get("spec") or {})}


def roles(source: dict[str, pd.DataFrame], spec: dict, eval_only: bool, where: str) -> dict[str, str | None]:
    """Role -> the split of ``source`` it takes (None: the one set of rows, to be split by ``test_size`` or
    ``test_fraction``). A mistake is a one-line :class:`UserError` naming the splits found and what is allowed."""
    found = sorted(source)
    wanted = spec.get("splits")
    if wanted:
        bad = [r for r in wanted if r not in ROLES]
        if bad:
            raise UserError(f"{where}: spec.splits has role {bad[0]!r}; allowed roles: pool, test")
        missing = [s for s in wanted.values() if s not in source]
        if missing:
            raise UserError(f"{where}: spec.splits names split {missing[0]!r}, which the data does not have; allowed: "
                            f"{', '.join(found)}")
        out = dict(wanted)
    elif set(found) <= set(ROLES) and len(found) == 2 or eval_only and found == ["test"]:
        out = {r: r for r in found}
    elif {"train", "test"} <= set(found):
        out = {"pool": "train", "test": "test"}
    elif len(found) == 1:
        out = {"one": found[0]}
    else:
        raise UserError(f"{where}: the data has splits {', '.join(found)}; say which is the pool and which the test "
                        "set with spec.splits, e.g. {pool: train, test: validation}")
    if eval_only:
        return {"test": out.get("test", out.get("one", out.get("pool")))}
    if "one" in out:
        if spec.get("test_size") is None and spec.get("test_fraction") is None:
            raise UserError(f"{where}: one set of rows, and a dataset needs a pool and a test set; allowed: "
                            "spec.test_fraction (e.g. 0.2) or spec.test_size (items held out, seeded by the dataset's "
                            "seed), or data_files: {pool: FILE, test: FILE}")
        return {"pool": None, "test": out["one"]}
    if set(out) != set(ROLES):
        lacking = [r for r in ROLES if r not in out][0]
        raise UserError(f"{where}: no split is the {lacking} (spec.splits: {out}); allowed: spec.splits mapping both "
                        f"pool and test to the data's splits ({', '.join(found)}), or spec.test_fraction to hold out "
                        "a seeded test set of one split")
    return out


def test_count(n: int, spec: dict, where: str) -> int:
    """How many of ``n`` items a seeded split holds out: ``spec.test_size``, or ``spec.test_fraction`` of them
    (rounded, at least one); the pool keeps at least one."""
    if spec.get("test_size") is not None:
        k = int(spec["test_size"])
    else:
        frac = float(spec["test_fraction"])
        if not 0 < frac < 1:
            raise UserError(f"{where}: spec.test_fraction {frac:g} is not a share; allowed: a number in (0, 1)")
        k = max(1, int(round(n * frac)))
    if not 0 < k < n:
        raise UserError(f"{where}: holding out {k} of {n} item(s) leaves no {'test set' if k <= 0 else 'pool'}; "
                        f"allowed: spec.test_size between 1 and {n - 1}, or a spec.test_fraction in (0, 1)")
    return k


def gradable(frame: pd.DataFrame, spec: dict, answer_type: str, where: str) -> pd.DataFrame:
    """``frame`` without rows lacking a gold answer, refused in one line above ``spec.max_ungradable`` of them
    (naming the column and the form expected); ``drop_ungradable: false`` keeps them."""
    bad = frame["answer"].isna().to_numpy()
    n, limit = int(bad.sum()), float(spec["max_ungradable"])
    if not n:
        return frame
    column = (spec.get("fields") or {}).get("answer")
    i = int(np.flatnonzero(bad)[0])
    raw = "user_answer" if column == "answer" and "user_answer" in frame else column
    shown = frame[raw].iloc[i] if raw in frame else None
    because = (f"its column {column!r} (spec.fields.answer) holds no {answer_type} answer (row {i + 1}, id "
               f"{frame['id'].iloc[i]}: {excerpt(shown)!r}); allowed for answer_type {answer_type}: {FORMS[answer_type]}")
    if n == len(frame) or n > limit * len(frame):
        raise UserError(f"{where}: {n} of {len(frame)} rows have no gold answer because {because}; fix the rows, "
                        "map the right column or answer_type, or raise spec.max_ungradable")
    if spec.get("drop_ungradable", True):
        log.warning("%s: dropping %d row(s) without a gold answer: %s", where, n, frame.loc[bad, "id"].tolist()[:10])
        return frame.loc[~bad].reset_index(drop=True)
    return frame


def _cap(frame: pd.DataFrame, n: int | None, seed: int, salt: int) -> pd.DataFrame:
    if n is None or len(frame) <= int(n):
        return frame.reset_index(drop=True)
    keep = np.sort(np.random.default_rng([int(seed), salt]).choice(len(frame), size=int(n), replace=False))
    return frame.iloc[keep].reset_index(drop=True)


def converted(frame: pd.DataFrame, ds: dict, spec: dict, where: str) -> pd.DataFrame:
    """One split's rows in the project's columns, checked: every row has a question, none is too long, a question
    repeated is kept once, ids are unique."""
    out = rows(frame.reset_index(drop=True), spec.get("fields") or {}, ds["answer_type"], where)
    empty = out["prompt"].isna() | (out["prompt"].astype(str).str.strip() == "")
    if empty.any():
        i = int(np.flatnonzero(empty.to_numpy())[0])
        raise UserError(f"{where}: row {i + 1} has no question (spec.fields.question: "
                        f"{(spec.get('fields') or {}).get('question')!r}); fill it in or drop the row")
    out = refuse_long_prompts(out, spec["max_prompt_chars"], where)
    out = drop_repeats(out, where)
    refuse_repeated_ids(out, where)
    return out


def load(ds: dict) -> dict[str, pd.DataFrame]:
    """``{"pool": frame, "test": frame}`` of a ``source: files`` dataset entry (only ``test`` when eval-only)."""
    spec = spec_of(ds)
    seed, unlabeled = int(ds.get("seed", 0)), bool(ds.get("answers"))
    source = load_source(spec)
    chosen = roles(source, spec, bool(ds.get("eval_only")), origin(spec))
    frames: dict[str, pd.DataFrame] = {}
    for role, split in chosen.items():
        if split is None:
            continue
        where = origin(spec, split)
        frames[role] = converted(source[split], ds, spec, where)
    if "pool" in chosen and chosen["pool"] is None:  # one set of rows: a seeded test set held out of it
        every, where = frames.pop("test"), origin(spec)
        if not unlabeled:
            every = gradable(every, spec, ds["answer_type"], where)
        k = test_count(len(every), spec, where)
        order = np.random.default_rng([seed, 7]).permutation(len(every))
        frames["test"] = every.iloc[np.sort(order[:k])].reset_index(drop=True)
        frames["pool"] = every.iloc[np.sort(order[k:])].reset_index(drop=True)
    for role in list(frames):
        if not (unlabeled and role == "pool"):
            frames[role] = gradable(frames[role], spec, ds["answer_type"], origin(spec, chosen.get(role)))
        frames[role] = _cap(frames[role], spec.get("max_items"), seed, 1 + ROLES.index(role))
    if "pool" in frames:
        frames["pool"] = _cap(frames["pool"], spec.get("pool_size"), seed, 3)
    return {r: frames[r] for r in ROLES if r in frames}
