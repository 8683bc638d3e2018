"""A config, validated: the schema (defaults filled in), then the checks it cannot express. What the Snakefile, the
CLI and the tests call."""

from __future__ import annotations

from pathlib import Path

import yaml

from grpo_budget.experiment import checks, consistency, relative, schema
from grpo_budget.experiment.schema import ConfigError


def validate(config: dict, base: str | Path | None = None) -> dict:
    """Validate ``config`` in place (defaults filled in) and return it; raise :class:`~grpo_budget.experiment.schema.ConfigError`.
    ``base``: the config file's folder, which relative input paths are read from (None: the working folder)."""
    schema.check(config)
    _expand_home(config)
    relative.resolve(config, None if base is None else Path(base))
    checks.semantics(config)
    consistency.check(config)
    checks.inputs(config)
    checks.sweep(config)  # every variant of a `sweep:` block, before any job starts
    return config


def _expand_home(config: dict) -> None:
    """``~`` in a model's local path or GGUF file is the user's home, as in a shell (the SmolLM2 wheel's cache is
    ``~/.cache/grpo-budget``); hub ids never start with it."""
    for model in config["models"].values():
        for key in ("path", "gguf"):
            if isinstance(model.get(key), str) and model[key].startswith("~"):
                model[key] = str(Path(model[key]).expanduser())


def load(path: str | Path) -> dict:
    """Read and validate a config file; a missing file or a YAML syntax error is a one-line ConfigError."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config file ({e.strerror})") from None
    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}:{where}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: a config is a YAML mapping of fields (models, datasets, ...), got {type(cfg).__name__}")
    return validate(cfg, Path(path).resolve().parent)
