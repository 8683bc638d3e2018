"""A config, validated: the schema with the registries' names (defaults filled in), then the checks it cannot
express. What the Snakefile, the CLI and the tests call; a stage reads what a setting is from
:mod:`grpo_budget.config`."""

from __future__ import annotations

from pathlib import Path

from grpo_budget.config import schema
from grpo_budget.experiment import checks, consistency, registries, relative


def validate(config: dict, base: str | Path | None = None) -> dict:
    """Validate ``config`` in place (defaults filled in) and return it; raise
    :class:`~grpo_budget.config.schema.ConfigError`. ``base``: the config file's folder, which relative input paths
    are read from (None: the working folder)."""
    schema.check(config, registries.schema())  # the registries' names are its enums
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
    return validate(schema.read(path), Path(path).resolve().parent)
