"""A job's provenance record: what made its outputs, written by the job when it succeeds, compared before a run.

Snakemake re-runs a job when an output is missing, an input is newer, or a setting changed since the run its own
working directory recorded (``.snakemake/``). That misses a user's files that no rule makes (data files, an answers
file, a local model folder edited in place) and another clone or config pointed at the same results folder (its
``.snakemake/`` knows nothing of these outputs). So each job's command also writes, when it succeeds, a record of
what made its outputs: its rule's settings, its inputs and the digests of those user's files
(``provenance/{rule}/{job}.json``). Before a run, the workflow compares the record it would write now with the one
on disk, and forces the job when they differ, when the record is missing or unreadable ("unknown"), or when an
input of outputs that exist is gone. Nothing is written while the DAG is built: a dry run, a run refused by the
results folder's lock, or another config's run changes nothing a later run decides.

Paths under the results folder are recorded relative to it (``{results}/...``), so a moved folder re-runs nothing.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from grpo_budget.digest import file_digest, model_files
from grpo_budget.experiment.rules import RULES
from grpo_budget.generation import custom_rewards
from grpo_budget.io import relative, write_json
from grpo_budget.prepare.files import local_files


def files_read(config: dict, rule: str, wildcards: dict, made_by_rules: bool) -> list[str]:
    """The user's files one job reads that no rule makes: the data files (prepare), the answers file (train,
    verify), a local model folder's files (the rules that load the model, unless ``made_by_rules``: a bootstrapped
    or fetched model is a rule output, which Snakemake tracks itself)."""
    files: list[str] = []
    ds = config["datasets"].get(wildcards.get("dataset", ""), {})
    if rule == "prepare":
        files += local_files((ds.get("spec") or {}).get("data_files"))
    if RULES[rule].reads_answers and ds.get("answers"):
        files.append(ds["answers"])
    if RULES[rule].loads_model:  # your own grading and reward functions' files (a module installed is not tracked)
        graded = config["datasets"].get(wildcards.get("dataset") or wildcards.get("evalset", ""), {})
        used = custom_rewards.refs(graded, config.get("training", {}).get("rewards") if rule == "train" else None)
        files += [f for f in map(custom_rewards.file_of, used) if f]
    model = config["models"].get(wildcards.get("model", ""), {})
    if RULES[rule].loads_model and not made_by_rules and os.path.isdir(model.get("path", "")):
        files += [str(p) for p in model_files(model["path"])]
    return files


@functools.lru_cache(maxsize=None)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    return file_digest(Path(path))


def digest(path: str) -> str:
    """A file's content digest (``size:hash``; cached while its size and mtime hold: many jobs read one model)."""
    try:
        st = os.stat(path)
    except OSError:
        return "missing"  # the job itself names the file
    return _digest(os.path.abspath(path), st.st_size, st.st_mtime_ns)


def wanted(results: str, settings: dict, inputs: list[str], files: list[str]) -> dict:
    """The record a job would write now: its settings, its inputs (paths relative to ``results``, hashed) and the
    content digests of the user's ``files``, with ``digest``, the hash of all three."""
    content = json.loads(relative(json.dumps({
        "settings": settings,
        "inputs": sorted(inputs),
        "files": {os.path.abspath(f): digest(f) for f in files},
    }, sort_keys=True), results))
    # an aggregate job reads every run's files: their list, hashed, keeps its command line short
    content["inputs"] = {"count": len(inputs), "sha256": hashlib.sha256("\n".join(content["inputs"]).encode())
                         .hexdigest()[:16]}
    content["digest"] = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]
    return content


@dataclass(frozen=True)
class Verdict:
    """Whether a job's outputs were made by what it would run with now; ``why`` says what differs when not."""

    current: bool
    why: str = ""


def compare(path: str | os.PathLike, want: dict) -> Verdict:
    """The record at ``path`` against ``want`` (:func:`wanted`): a missing or unreadable record is unknown."""
    try:
        old = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return Verdict(False, "no record of what made its outputs")
    except (OSError, ValueError):
        return Verdict(False, "its record is unreadable")
    if not isinstance(old, dict):
        return Verdict(False, "its record is unreadable")
    if old.get("digest") == want["digest"]:
        return Verdict(True)
    parts = [k for k in ("settings", "inputs", "files") if old.get(k) != want[k]]
    if "settings" in parts and isinstance(old.get("settings"), dict):
        parts[parts.index("settings")] = f"settings ({', '.join(changed(old['settings'], want['settings']))})"
    return Verdict(False, f"made with other {', '.join(parts) or 'records'}")


def changed(old: dict, new: dict, prefix: str = "") -> list[str]:
    """The names of the settings that differ; a setting that is a JSON object (a job's ``--settings``) by key."""
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if a == b:
            continue
        inner = [_object(a), _object(b)]
        out += changed(*inner, f"{prefix}{k}.") if None not in inner else [f"{prefix}{k}"]
    return out


def _object(value) -> dict | None:
    try:
        value = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def write(path: str | os.PathLike, content: dict | str) -> None:
    """Write a job's record (the job's command does, when it succeeds), atomically."""
    write_json(json.loads(content) if isinstance(content, str) else content, Path(path))
