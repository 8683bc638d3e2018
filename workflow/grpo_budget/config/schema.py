"""The config schema (``config.schema.yaml`` beside this module), the one source of defaults: its sections and their
defaults, a config file read, and validation with the defaults filled in. Every error is one line naming the field
and what is allowed.

The enums that name a registry's entries (policies, benchmarks, methods, rewards ...) are not in the file: the
workflow adds them from the registries (:mod:`grpo_budget.experiment.registries`) before it validates a whole
config, and passes that schema to :func:`check` and :func:`fill`. Without it they check the file as written."""

from __future__ import annotations

from copy import deepcopy
from functools import lru_cache
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import best_match

from grpo_budget.errors import UserError

SCHEMA_PATH = Path(__file__).resolve().with_name("config.schema.yaml")  # package data
BOOTSTRAP = ("models", "*", "bootstrap")  # the schema path of a model's bootstrap entry
MODEL = ("models", "*")


class ConfigError(UserError):
    """A configuration that cannot run; the message names the field and the allowed values."""


@lru_cache(maxsize=1)
def raw() -> dict:
    """The schema file as written (shared: do not modify it)."""
    return yaml.safe_load(SCHEMA_PATH.read_text())


def section_schema(schema: dict, pointer: tuple[str, ...]) -> dict:
    """The sub-schema at ``pointer`` (property names; ``*`` = any key of a mapping or any item of a list)."""
    node = schema
    for key in pointer:
        if key == "*":
            node = node["items"] if node.get("type") == "array" else node["additionalProperties"]
        else:
            node = node["properties"][key]
    return node


def defaults(pointer: tuple[str, ...]) -> dict:
    """The defaults the schema gives the properties of the section at ``pointer``."""
    props = section_schema(raw(), pointer).get("properties", {})
    return {name: deepcopy(sub["default"]) for name, sub in props.items() if "default" in sub}


@lru_cache(maxsize=4)
def with_enums(enums: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]) -> dict:
    """The schema with ``enums`` (pointer, names) in place: a mapping's keys (an object section, e.g.
    ``training.rewards``) take them as their ``propertyNames``, any other field as its ``enum``. Shared: do not
    modify it."""
    schema = deepcopy(raw())
    for pointer, names in enums:
        node = section_schema(schema, pointer)
        if node.get("type") == "object":
            node["propertyNames"] = {"enum": list(names)}
        else:
            node["enum"] = list(names)
    return schema


def read(path: str | Path) -> dict:
    """A config file as a mapping (not yet validated); a missing file or a YAML syntax error is one line."""
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
        raise ConfigError(f"{path}: a config is a YAML mapping of fields (models, datasets, ...), "
                          f"got {type(cfg).__name__}")
    return cfg


def check(config: dict, schema: dict | None = None) -> None:
    """Validate ``config`` against the whole ``schema`` (the file's by default), filling in its defaults in place;
    raise :class:`ConfigError`."""
    schema = raw() if schema is None else schema
    error = best_match(_DefaultsValidator(schema).iter_errors(config))
    if error is not None:
        where = _field(error.absolute_path)
        raise ConfigError(f"config field '{where}': {error.message}. {_allowed(error, schema)}".strip())


def fill(pointer: tuple[str, ...], values: dict, schema: dict | None = None) -> dict:
    """``values`` validated against the section at ``pointer`` of ``schema`` (the file's by default), with its
    defaults filled in (a copy)."""
    out = deepcopy(values)
    error = best_match(_DefaultsValidator(section_schema(raw() if schema is None else schema, pointer))
                       .iter_errors(out))
    if error is not None:
        where = _field([p for p in pointer if p != "*"] + list(error.absolute_path))
        raise ConfigError(f"config field '{where}': {error.message}")
    return out


def fill_top(values: dict, keys: tuple[str, ...]) -> dict:
    """Top-level fields ``keys`` of the config: ``values``' or the schema's defaults."""
    props = raw()["properties"]
    return {k: deepcopy(values[k]) if k in values else deepcopy(props[k]["default"]) for k in keys}


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
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


_DefaultsValidator = _with_defaults(Draft202012Validator)
