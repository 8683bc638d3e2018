"""Configuration: JSON-schema validation with defaults filled in, plus the checks a schema cannot express.

Every error names the field and what is allowed, and is raised before any job starts.
"""

from __future__ import annotations

from copy import deepcopy
from pathlib import Path
from typing import Any

import yaml

from .errors import UserError

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"


class ConfigError(UserError, ValueError):
    """A configuration that cannot run; the message names the field and the allowed values."""


def load_schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _field(path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _allowed(error, root: dict) -> str:
    schema = error.schema if isinstance(error.schema, dict) else {}
    if "enum" in schema:
        return "allowed: " + ", ".join(map(repr, schema["enum"]))
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        return "allowed fields: " + ", ".join(allowed) if allowed else ""
    # Otherwise the nearest description up the schema path says what the field accepts.
    path = list(error.absolute_schema_path)
    while path:
        node = root
        for key in path:
            node = node[key]
        if isinstance(node, dict) and node.get("description"):
            return "allowed: " + node["description"]
        path.pop()
    return ""


def _with_defaults(validator_class):
    """A validator that also fills in ``default`` values (the jsonschema FAQ recipe)."""
    from jsonschema import validators

    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


def validate(config: dict) -> dict:
    """Validate ``config`` in place (defaults filled in) and return it; raise :class:`ConfigError`."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    schema = load_schema()
    validator = _with_defaults(Draft202012Validator)(schema)
    error = best_match(validator.iter_errors(config))
    if error is not None:
        where = _field(error.absolute_path)
        raise ConfigError(f"config field '{where}': {error.message}. {_allowed(error, schema)}".strip())
    _check_semantics(config)
    return config


def _check_semantics(cfg: dict) -> None:
    datasets = cfg["datasets"]
    names = ", ".join(sorted(datasets))
    for name, ds in datasets.items():
        where = f"datasets.{name}"
        if ds["source"] == "builtin":
            for key in ("generator", "pool_size", "test_size"):
                if key not in ds and not (key == "pool_size" and ds.get("eval_only")):
                    raise ConfigError(f"config field '{where}.{key}' is required for source: builtin")
        elif "benchmark" not in ds:
            raise ConfigError(f"config field '{where}.benchmark' is required for source: benchmark; "
                              "allowed: gsm8k, bbh_shuffled_objects, math, aime2025")
        for i, other in enumerate(ds.get("ood", [])):
            if other not in datasets:
                raise ConfigError(f"config field '{where}.ood[{i}]': unknown dataset {other!r}; allowed: {names}")
    trainable = [n for n, d in datasets.items() if not d.get("eval_only")]
    if not trainable:
        raise ConfigError("config field 'datasets': every dataset is eval_only; at least one must be trainable")
    for mname, model in cfg["models"].items():
        boot = model.get("bootstrap")
        if boot:
            ds = datasets.get(boot["dataset"])
            if ds is None:
                raise ConfigError(f"config field 'models.{mname}.bootstrap.dataset': unknown dataset "
                                  f"{boot['dataset']!r}; allowed: {names}")
            if ds.get("generator") != "frame_arithmetic":
                raise ConfigError(f"config field 'models.{mname}.bootstrap.dataset': {boot['dataset']!r} is not a "
                                  "builtin frame_arithmetic dataset; allowed: the frame_arithmetic datasets")
    for i, budget in enumerate(cfg["budgets"]):
        if isinstance(budget, int):
            for name in trainable:
                size = pool_size(datasets[name])
                if size is not None and budget > size:
                    raise ConfigError(f"config field 'budgets[{i}]': {budget} items is above the pool size of "
                                      f"dataset {name!r} ({size}); allowed: a count ≤ {size} or a fraction in (0, 1]")


def pool_size(ds: dict) -> int | None:
    """The pool size a dataset entry promises, where the config says it."""
    if "pool_size" in ds:
        return int(ds["pool_size"])
    return ds.get("spec", {}).get("pool_size")


def load(path: str | Path) -> dict:
    """Read and validate a config file."""
    return validate(yaml.safe_load(Path(path).read_text()))


def budget_label(budget: Any) -> str:
    """The path label of a budget: ``0.1`` → ``"0.1"``, ``100`` → ``"100"``."""
    return repr(float(budget)) if isinstance(budget, float) else str(int(budget))
