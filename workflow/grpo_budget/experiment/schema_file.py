"""The config schema file (package data) as written, its sections and their defaults, without the registries'
enums that :mod:`grpo_budget.experiment.schema` adds: a stage those registries import (prepare) reads its defaults
here."""

from __future__ import annotations

from copy import deepcopy
from functools import lru_cache
from pathlib import Path

import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"  # package data


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
