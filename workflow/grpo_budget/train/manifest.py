"""Where a training manifest's paths lie: written relative to the results folder (``{results}/runs/...``) and read
back against the folder the manifest is in now, so a copied or moved results folder evaluates its own checkpoints.

The results folder is found from the manifest's place in the plan's layout (``runs/{model}/.../manifest.json``,
:data:`grpo_budget.experiment.plan.PATTERNS`); a manifest outside that layout (one written by hand or by a test)
counts its own folder as the results folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from grpo_budget.errors import UserError
from grpo_budget.paths import paths
from grpo_budget.io import RESULTS, absolute, inside

WILDCARD = {"seed": r"\d+"}  # the Snakefile's constraint; every other part is one path component


def _part(template: str) -> re.Pattern:
    pieces = re.split(r"\{(\w+)\}", template)  # literal, wildcard name, literal, ...
    return re.compile("".join(WILDCARD.get(p, r"[^/]+") if i % 2 else re.escape(p) for i, p in enumerate(pieces)))


def results_root(manifest: str | os.PathLike) -> Path:
    """The results folder ``manifest`` lies in (absolute)."""
    path = absolute(manifest)
    for variants in (True, False):
        tail = Path(paths("", variants).manifest.lstrip("/")).parts
        if len(path.parts) > len(tail) and all(_part(t).fullmatch(p) for p, t in zip(path.parts[-len(tail):], tail)):
            return Path(*path.parts[:-len(tail)])
    return path.parent


def recorded(path: str | os.PathLike, manifest: str | os.PathLike) -> str:
    """How a manifest records ``path``: ``{results}/...`` inside its results folder, else as given (a hub id, a
    model folder of the user's)."""
    root = results_root(manifest)
    if os.path.exists(path) and inside(path, root):
        return f"{RESULTS}/{absolute(path).relative_to(root).as_posix()}"
    return str(path)


def checkpoint_path(manifest: str | os.PathLike, entry: str) -> Path:
    """A listed checkpoint's path in the results folder the manifest is in now.

    ``{results}/...`` is read against that folder. A manifest written before paths were relative lists them as
    the run wrote them (absolute, or relative to its working directory): a path inside this results folder is
    read as it is; another, ``.../checkpoints/checkpoint-N`` beside the manifest when it was written (the folder it
    was copied or moved from), is read from the same run folder here, never from there. A path that is neither is
    refused in one line (nothing is moved or deleted).
    """
    here = absolute(manifest).parent
    root = results_root(manifest)
    if entry.startswith(RESULTS + "/"):
        path = absolute(root / entry[len(RESULTS) + 1:])
        if inside(path, root):
            return path
    elif inside(entry, root):
        return absolute(entry)
    else:
        old = Path(entry)
        run = here.relative_to(root).parts or (here.name,)  # the run's folder, as its path ended when written
        if len(old.parts) >= len(run) + 2 and old.parent.parent.parts[-len(run):] == run:
            return here / old.parent.name / old.name
    raise UserError(f"{manifest} lists checkpoint {entry}, which is not in this run's folder {here}: delete the "
                    "manifest and run the same snakemake command again to retrain the run")
