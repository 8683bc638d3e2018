"""A training run's checkpoint folder: which checkpoints resume can use, and which run the folder belongs to.

The folder is *not* a Snakemake output (Snakemake deletes outputs before it re-runs a job). It records the
fingerprint of the run that made its checkpoints (``fingerprint.json``): a run with another fingerprint moves them
aside and starts fresh rather than resuming someone else's trajectory.
"""

from __future__ import annotations

import json
import logging
import re
import struct
import zipfile
from pathlib import Path

from grpo_budget.io import numbered_path, read_json, write_json
from grpo_budget.train.fingerprint import differing_parts

log = logging.getLogger(__name__)

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
FINGERPRINT_FILE = "fingerprint.json"
INCOMPLETE_DIR = "incomplete"


def checkpoints(folder: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints in ``folder`` as (step, path), oldest first (see ``incomplete_reason``)."""
    return [(step, p) for step, p in _checkpoint_dirs(folder) if incomplete_reason(p) is None]


def _checkpoint_dirs(folder: str | Path) -> list[tuple[int, Path]]:
    folder = Path(folder)
    found = []
    for p in folder.glob("checkpoint-*") if folder.exists() else []:
        m = CHECKPOINT_RE.match(p.name)
        if m and p.is_dir():
            found.append((int(m.group(1)), p))
    return sorted(found)


def incomplete_reason(checkpoint: Path) -> str | None:
    """Why resume or evaluation could not use ``checkpoint`` (None when it is complete).

    Resume needs what HF ``Trainer._load_from_checkpoint`` and ``_load_optimizer_and_scheduler`` load: the adapter
    (``adapter_model.safetensors`` or ``.bin`` beside ``adapter_config.json``), ``optimizer.pt`` and
    ``scheduler.pt`` (the Trainer silently starts a fresh optimizer without them), plus the RNG state and
    ``trainer_state.json``, which the Trainer writes last. ``torch.save`` files are zip archives, so a truncated
    one fails the zip check.
    """
    for name in ("trainer_state.json", "adapter_config.json"):
        try:
            json.loads((checkpoint / name).read_text())
        except (OSError, ValueError):
            return f"{name} missing or unreadable"
    safetensors, pickled = checkpoint / "adapter_model.safetensors", checkpoint / "adapter_model.bin"
    if not (_safetensors_ok(safetensors) or _zip_ok(pickled)):
        return "adapter_model.safetensors (or .bin) missing or unreadable"
    for name in ("optimizer.pt", "scheduler.pt"):
        if not _zip_ok(checkpoint / name):
            return f"{name} missing or unreadable"
    if not any(_zip_ok(p) for p in checkpoint.glob("rng_state*.pth")):
        return "rng_state.pth missing or unreadable"
    return None


def _safetensors_ok(path: Path) -> bool:
    """The header parses and the file is as long as the tensors it declares (a truncated file is not)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > size - 8:
                return False
            header = json.loads(f.read(n))
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
        return size == 8 + n + end
    except (OSError, ValueError, struct.error, KeyError, TypeError, IndexError):
        return False


def _zip_ok(path: Path) -> bool:
    return path.is_file() and zipfile.is_zipfile(path)


def discard_incomplete(folder: str | Path) -> list[Path]:
    """Move checkpoint folders that resume could not use (a killed job's half-written one, a deleted file) into
    ``folder/incomplete/``, kept for inspection, so that resuming never reads them; returns their old paths."""
    moved = []
    for _, p in _checkpoint_dirs(folder):
        reason = incomplete_reason(p)
        if reason is None:
            continue
        target = numbered_path(f"{Path(folder) / INCOMPLETE_DIR / p.name}.")
        target.parent.mkdir(exist_ok=True)
        p.rename(target)
        log.warning("checkpoint %s is incomplete (%s): moved it to %s, not resuming from it", p, reason, target)
        moved.append(p)
    return moved


def claim_checkpoint_dir(checkpoint_dir: Path, record: dict) -> Path | None:
    """Make ``checkpoint_dir`` belong to the run with fingerprint ``record``: checkpoints of another run (or of
    an unknown one: no readable fingerprint file) are moved aside whole to ``<dir>.stale-N``, never deleted.
    Returns where they went, or None."""
    try:
        old = read_json(checkpoint_dir / FINGERPRINT_FILE)
    except (OSError, ValueError):
        old = None
    if isinstance(old, dict) and old.get("fingerprint") == record["fingerprint"]:
        return None
    moved = None
    if checkpoint_dir.is_dir() and any(p.name != FINGERPRINT_FILE for p in checkpoint_dir.iterdir()):
        moved = numbered_path(f"{checkpoint_dir}.stale-")
        checkpoint_dir.rename(moved)
        if isinstance(old, dict):
            why = f"{', '.join(differing_parts(old.get('parts') or {}, record['parts'])) or 'fingerprint'} changed"
        else:
            why = f"it has no readable {FINGERPRINT_FILE}"
        log.warning("checkpoints in %s come from a different run (%s): moved them to %s; training starts fresh "
                    "from step 0", checkpoint_dir, why, moved)
    write_json(record, checkpoint_dir / FINGERPRINT_FILE)
    return moved
