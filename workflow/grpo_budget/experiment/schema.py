"""The config schema (``workflow/grpo_budget/schemas/config.schema.yaml``): validation with defaults filled in, the sections the
typed settings are built from, and the enums that come from the package's registries.

Every error names the field and what is allowed.
"""

from __future__ import annotations

from copy import deepcopy
from functools import lru_cache

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import best_match

from grpo_budget.errors import UserError
from grpo_budget.experiment.schema_file import SCHEMA_PATH, raw, section_schema
from grpo_budget.generation.grading import ANSWER_TYPES
from grpo_budget.prepare.benchmarks import BENCHMARKS
from grpo_budget.prepare.splits import GENERATORS
from grpo_budget.select.policies import arm_names
from grpo_budget.train.methods import GUIDE_WHEN, METHODS, RESAMPLE_RULES

__all__ = ["SCHEMA_PATH", "ConfigError", "check", "fill", "fill_top", "load_schema", "section_schema"]


class ConfigError(UserError):
    """A configuration that cannot run; the message names the field and the allowed values."""


BOOTSTRAP = ("models", "*", "bootstrap")  # the schema path of a model's bootstrap entry


# Enums of the schema that come from the package's registries (the schema file leaves them open).
REGISTRY_ENUMS = {
    ("policies", "*"): arm_names,
    ("datasets", "*", "benchmark"): lambda: list(BENCHMARKS),
    ("datasets", "*", "generator"): lambda: list(GENERATORS),
    ("datasets", "*", "answer_type"): lambda: list(ANSWER_TYPES),
    ("training", "method"): lambda: list(METHODS),
    ("training", "codapo_resample"): lambda: list(RESAMPLE_RULES),
    ("training", "guidance_when"): lambda: list(GUIDE_WHEN),
}


@lru_cache(maxsize=4)
def _with_enums(enums: tuple[tuple[str, ...], ...]) -> dict:
    schema = deepcopy(raw())
    for pointer, names in zip(REGISTRY_ENUMS, enums):
        section_schema(schema, pointer)["enum"] = list(names)
    return schema


def load_schema() -> dict:
    """The config schema with the registries' names as the enums of policies, benchmarks and generators. Built once
    per state of the registries (a registry entry added at run time is allowed), shared: do not modify it."""
    return _with_enums(tuple(tuple(names()) for names in REGISTRY_ENUMS.values()))


def check(config: dict) -> None:
    """Validate ``config`` against the whole schema, filling in its defaults in place; raise :class:`ConfigError`."""
    schema = load_schema()
    error = best_match(_validator(schema).iter_errors(config))
    if error is not None:
        where = _field(error.absolute_path)
        raise ConfigError(f"config field '{where}': {error.message}. {_allowed(error, schema)}".strip())


def fill(pointer: tuple[str, ...], values: dict) -> dict:
    """``values`` validated against the schema section at ``pointer``, with its defaults filled in (a copy)."""
    out = deepcopy(values)
    error = best_match(_validator(section_schema(load_schema(), pointer)).iter_errors(out))
    if error is not None:
        where = _field([p for p in pointer if p != "*"] + list(error.absolute_path))
        raise ConfigError(f"config field '{where}': {error.message}")
    return out


def fill_top(values: dict, keys: tuple[str, ...]) -> dict:
    """Top-level fields ``keys`` of the config: ``values``' or the schema's defaults."""
    props = load_schema()["properties"]
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


def _validator(schema: dict):
    return _DefaultsValidator(schema)
