"""A local model folder (``models.NAME.path``): what it must hold, checked before any job, and weights pickled with
code that ``torch.load(weights_only=True)`` refuses, named in one line. Loading keeps that refusal on purpose: a
pickle can run any code when it is read."""

from __future__ import annotations

import json
from pathlib import Path

WEIGHTS = ("*.safetensors", "pytorch_model*.bin")  # what transformers' from_pretrained reads, safetensors first
TOKENIZER = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")  # any one suffices
CONVERT = ("convert them to safetensors where you trust their source (torch.load(..., weights_only=False), then "
           "save_pretrained(FOLDER), which writes model.safetensors), or use the model's safetensors release")


def problem(folder: str | Path) -> str | None:
    """Why ``folder`` cannot be loaded as a model, in one line naming it and what it must hold; None when it holds
    config.json with a model_type, weights and a tokenizer, and pickled weights only if loadable safely."""
    folder = Path(folder)
    missing = []
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        config = None
    if not isinstance(config, dict) or "model_type" not in config:
        missing.append("config.json with a model_type" if config is None else "a model_type in its config.json")
    weights = sorted(p for pattern in WEIGHTS for p in folder.glob(pattern))
    if not weights:
        missing.append("weights (model.safetensors, or pytorch_model.bin)")
    if not any((folder / name).is_file() for name in TOKENIZER):
        missing.append(f"a tokenizer ({' or '.join(TOKENIZER[:2])})")
    if missing:
        return (f"{folder} lacks {', '.join(missing)}; a model folder holds what save_pretrained writes for a model "
                "and its tokenizer (or a hub download of them)")
    if any(p.suffix == ".safetensors" for p in weights):
        return None  # read instead of any pickle beside them
    return next(filter(None, map(refused_pickle, weights)), None)


def refused_pickle(path: Path) -> str | None:
    """Why the pickled checkpoint ``path`` would be refused by ``torch.load(weights_only=True)`` (the globals it
    needs beyond tensors), or None. Only its pickle's opcodes are read, not its tensors."""
    import torch

    try:
        unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
    except (ValueError, RuntimeError, OSError):
        return None  # a legacy (pre-zip) or damaged file: loading it says, and pickle_error names it
    if not unsafe:
        return None
    return pickle_error(path, f"it needs {', '.join(unsafe[:3])}{' ...' if len(unsafe) > 3 else ''}")


def pickle_error(path: str | Path, detail: str) -> str:
    """The one line for pickled weights that ``torch.load(weights_only=True)`` refuses."""
    return (f"{path}: pickled weights that torch.load(weights_only=True) refuses ({detail}); loading them could run "
            f"any code, so they are not loaded: {CONVERT}")


def pickles(folder: str | Path) -> list[Path]:
    """The pickled weight files of a local folder (what a refused load read)."""
    return sorted(Path(folder).glob(WEIGHTS[1])) if Path(folder).is_dir() else []
