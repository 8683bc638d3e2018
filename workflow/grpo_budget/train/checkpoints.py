"""A training run's checkpoint folder: which checkpoints resume can use, and which run the folder belongs to.

The folder is *not* a Snakemake output (Snakemake deletes outputs before it re-runs a job). It records the
fingerprint of the run that made its checkpoints (``fingerprint.json``): a run with another fingerprint moves them
aside and starts fresh rather than resuming someone else's trajectory. Each checkpoint records the sha256 of its files
(``sha256.json``), written once the Trainer has saved them all; resume and evaluation check the files against it.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import struct
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grpo_budget.digest import sha256_of
from grpo_budget.errors import UserError
from grpo_budget.io import disk_full, full_disk, guard, numbered_path, read_json, write_json
from grpo_budget.train.fingerprint import differing_parts
from grpo_budget.train.manifest import checkpoint_path

log = logging.getLogger(__name__)

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
FINGERPRINT_FILE = "fingerprint.json"
INCOMPLETE_DIR = "incomplete"
DIGEST_FILE = "sha256.json"
ADAPTER_FILES = ("adapter_model.safetensors", "adapter_model.bin")


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
    one fails the zip check. Files overwritten in place (garbage with a valid header and length) fail their
    recorded sha256; a checkpoint without ``sha256.json`` was cut off before the digests were written.
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
    return _digest_mismatch(checkpoint)


def _digest_mismatch(checkpoint: Path) -> str | None:
    try:
        recorded = json.loads((checkpoint / DIGEST_FILE).read_text())
        if not isinstance(recorded, dict):
            raise ValueError(DIGEST_FILE)
    except (OSError, ValueError):
        return f"{DIGEST_FILE} missing or unreadable (the save stopped before its digests were written)"
    for name, digest in sorted(recorded.items()):
        path = checkpoint / name
        if not path.is_file():
            return f"{name} missing"
        if sha256_of(path) != digest:
            return f"{name} does not match its recorded sha256"
    return None


def record_digests(checkpoint: Path) -> dict[str, str]:
    """Write ``sha256.json`` in a saved checkpoint: every file's sha256. Called once all its files are written."""
    checkpoint = Path(checkpoint)
    digests = {p.name: sha256_of(p) for p in sorted(checkpoint.iterdir()) if p.is_file() and p.name != DIGEST_FILE}
    write_json(digests, checkpoint / DIGEST_FILE)
    return digests


def digest_recorder():
    """A ``TrainerCallback`` that records a checkpoint's digests: the Trainer calls ``on_save`` after
    ``_save_checkpoint`` has written the checkpoint's last file (``trainer_state.json``)."""
    from transformers import TrainerCallback

    class RecordDigests(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                record_digests(Path(args.output_dir) / f"checkpoint-{state.global_step}")

    return RecordDigests()


@contextmanager
def room_to_save(trainer, folder: Path) -> Iterator[None]:
    """A full disk while the Trainer saves a checkpoint into ``folder`` is one line naming it (``torch.save`` says
    only "[enforce fail at inline_container.cc:672] . unexpected pos"). The cut-off checkpoint (without its
    ``sha256.json``, written last) is removed first, so that the free space reported is what the next run has; that
    run resumes from the last complete checkpoint."""
    try:
        yield
    except Exception as e:
        if not disk_full(e):
            raise
        cut = Path(folder) / f"checkpoint-{trainer.state.global_step}"
        if cut.is_dir() and not (cut / DIGEST_FILE).exists():
            guard(cut, "delete")
            shutil.rmtree(cut, ignore_errors=True)
        raise full_disk(cut, "training resumes from its last complete checkpoint") from e


def adapter_file(checkpoint: Path) -> Path | None:
    return next((checkpoint / n for n in ADAPTER_FILES if (checkpoint / n).is_file()), None)


def adapter_digest(checkpoint: Path) -> str:
    """The recorded sha256 of a complete checkpoint's adapter weights (what the manifest lists)."""
    return read_json(checkpoint / DIGEST_FILE)[adapter_file(checkpoint).name]


def verify_listed(manifest_path: str | Path, entries: list[dict]) -> list[tuple[int, Path]]:
    """The listed checkpoints as (step, path) in the results folder the manifest is in now
    (:func:`grpo_budget.train.manifest.checkpoint_path`), each adapter's weights checked against the sha256 the
    manifest recorded at training (entries of older manifests carry none and are not checked). On a mismatch, move
    that checkpoint and any later one aside (training resumes before it) and delete the manifest, so that the
    workflow's next run retrains them; raise a ``UserError`` saying so."""
    listed = [(int(entry["step"]), checkpoint_path(manifest_path, entry["path"])) for entry in entries]
    for entry, (_, checkpoint) in zip(entries, listed):
        if "sha256" not in entry:
            continue
        weights = adapter_file(checkpoint)
        if weights is not None and sha256_of(weights) == entry["sha256"]:
            continue
        why = f"its {weights.name} does not match the sha256 recorded at training" if weights else \
            "its adapter weights are missing"
        guard(manifest_path, "delete")
        moved = _set_aside_from(checkpoint.parent, int(entry["step"]))
        Path(manifest_path).unlink(missing_ok=True)
        if moved and moved[0][1] == checkpoint:
            later = f" (and {len(moved) - 1} later checkpoint(s) beside it)" if len(moved) > 1 else ""
            why += f": moved it to {moved[0][2]}{later}"
        raise UserError(f"checkpoint {checkpoint}: {why}, and deleted {manifest_path}; run the same snakemake "
                        f"command again to retrain it")
    return listed


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
    """Move checkpoint folders that resume could not use (a killed job's half-written one, a deleted or overwritten
    file), and every later one, into ``folder/incomplete/``, kept for inspection: resuming then starts before the
    first bad one and saves them all again. Returns their old paths."""
    reasons = {step: incomplete_reason(p) for step, p in _checkpoint_dirs(folder)}
    bad = [step for step, reason in reasons.items() if reason is not None]
    if not bad:
        return []
    moved = _set_aside_from(folder, bad[0])
    for step, p, target in moved:
        if reasons[step] is not None:
            log.warning("checkpoint %s is incomplete (%s): moved it to %s, not resuming from it", p, reasons[step],
                        target)
        else:  # resuming from it would skip the bad one, which would then never be saved again
            log.warning("checkpoint %s comes after incomplete checkpoint-%d: moved it to %s, training saves it "
                        "again", p, bad[0], target)
    return [p for _, p, _ in moved]


def _set_aside_from(folder: Path, first: int) -> list[tuple[int, Path, Path]]:
    """Move the checkpoints of ``folder`` from step ``first`` on into ``folder/incomplete/``: (step, old, new)."""
    moved = []
    for step, p in _checkpoint_dirs(folder):
        if step < first:
            continue
        guard(p, "move")
        target = numbered_path(f"{Path(folder) / INCOMPLETE_DIR / p.name}.")
        target.parent.mkdir(exist_ok=True)
        try:
            p.rename(target)
        except FileNotFoundError:  # another job (an evaluation of the same run) moved it first
            continue
        moved.append((step, p, target))
    return moved


def same_run(old: dict, new: dict) -> bool:
    """Whether a fingerprint written before local model folders were named by content alone (their path was part
    of it) is ``new``'s run: the same parts once that path is dropped."""
    parts = old.get("parts")
    if not isinstance(parts, dict) or not isinstance(parts.get("model"), dict) or "files" not in parts["model"]:
        return False
    return {**parts, "model": {k: v for k, v in parts["model"].items() if k != "path"}} == new["parts"]


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
    if isinstance(old, dict) and same_run(old, record):
        write_json(record, checkpoint_dir / FINGERPRINT_FILE)
        return None
    moved = None
    if checkpoint_dir.is_dir() and any(p.name != FINGERPRINT_FILE for p in checkpoint_dir.iterdir()):
        guard(checkpoint_dir, "move")
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
