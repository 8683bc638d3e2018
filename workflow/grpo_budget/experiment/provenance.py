"""A job's provenance record: what decides its result beyond its rule inputs, as content digests.

Snakemake re-runs a job when an input is newer than its outputs, or when a setting changed since the run its own
working directory recorded (``.snakemake/``). That misses a user's files that no rule makes (data files, an answers
file, a local model folder: edited in place, nothing re-ran) and another clone or config pointed at the same results
folder (its ``.snakemake/`` knows nothing of these outputs). So each job gets one more input, a small record of its
rule's settings and of those files' digests, which is rewritten only when they change: an edit, or another
configuration, makes the record newer than the job's outputs and the job re-runs.
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

from grpo_budget.digest import file_digest, model_files
from grpo_budget.io import write_json
from grpo_budget.prepare.files import local_files

# A first record is dated 2000-01-01, older than any output: adding provenance to existing results re-runs nothing.
FIRST_RECORD_TIME = 946684800
MODEL_RULES = ("score", "verify", "train", "evaluate_base", "evaluate")  # the rules that load the base model
ANSWER_RULES = ("verify", "train")  # the rules that read a dataset's answers file


def files_read(config: dict, rule: str, wildcards: dict, made_by_rules: bool) -> list[str]:
    """The user's files one job reads that no rule makes: the data files (prepare), the answers file (train,
    verify), a local model folder's files (the rules that load the model, unless ``made_by_rules``: a bootstrapped
    or fetched model is a rule output, which Snakemake tracks itself)."""
    files: list[str] = []
    ds = config["datasets"].get(wildcards.get("dataset", ""), {})
    if rule == "prepare":
        files += local_files((ds.get("spec") or {}).get("data_files"))
    if rule in ANSWER_RULES and ds.get("answers"):
        files.append(ds["answers"])
    model = config["models"].get(wildcards.get("model", ""), {})
    if rule in MODEL_RULES and not made_by_rules and os.path.isdir(model.get("path", "")):
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


def record(path: str | Path, settings: dict, files: list[str]) -> bool:
    """Write the record of one job to ``path`` unless it already says the same; returns whether it was written.

    Each write carries its time: Snakemake skips a newer input whose checksum matches the one it recorded, so a
    record that went back to an earlier content must still differ from it."""
    path = Path(path)
    content = {"settings": settings, "files": {os.path.abspath(f): digest(f) for f in files}}
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = None
    if isinstance(old, dict) and {k: old.get(k) for k in content} == content:
        return False
    write_json({**content, "written_ns": time.time_ns()}, path)
    if old is None:
        os.utime(path, (FIRST_RECORD_TIME, FIRST_RECORD_TIME))
    return True
