"""Content digests of inputs that decide a result: files (sampled blocks) and model folders or hub revisions."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_of(path: str | Path, chunk: int = 1 << 20) -> str:
    """A file's whole-content sha256 (hex), read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def file_digest(path: Path, block: int = 1 << 20, samples: int = 16) -> str:
    """``size:hash`` of a file; files over ``samples`` blocks hash that many evenly spaced blocks, so that a
    multi-GB weight file costs 16 MiB of reading yet any re-trained or re-bootstrapped weights change it."""
    size = path.stat().st_size
    h = hashlib.sha256()
    with path.open("rb") as f:
        if size <= block * samples:
            h.update(f.read())
        else:
            for i in range(samples):
                f.seek((size - block) * i // (samples - 1))
                h.update(f.read(block))
    return f"{size}:{h.hexdigest()[:16]}"


def model_digest(model_path: str) -> dict:
    """A local model folder: digests of its files' content (config, tokenizer, weights; hidden files skipped), not
    their path or mtimes, so a copied or moved folder keeps it and a re-bootstrapped one does not. A hub id: the
    revision it resolves to."""
    folder = Path(model_path)
    if not folder.is_dir():
        return {"path": model_path, "revision": _hub_revision(model_path)}
    files = {p.relative_to(folder).as_posix(): file_digest(p) for p in model_files(folder)}
    return {"files": files}


def model_files(folder: str | Path) -> list[Path]:
    """A model folder's files, sorted; hidden ones (a download's caches) skipped."""
    root = Path(folder)
    return [p for p in sorted(root.rglob("*"))
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)]


def _hub_revision(model_id: str) -> str | None:
    """The commit a hub id resolves to (its snapshot folder's name; fetches only config.json, which loading the
    model needs anyway), or None when that cannot be told."""
    try:
        from transformers.utils import cached_file

        resolved = cached_file(model_id, "config.json")
    except Exception:  # unreachable or unknown: the path string stands alone, and loading the model will say why
        return None
    return Path(resolved).parent.name if resolved else None
