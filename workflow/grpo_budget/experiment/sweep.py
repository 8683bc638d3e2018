"""Sweeps: training settings as a grid axis.

The config's ``sweep:`` block names training settings by their dotted path and lists their values::

    sweep:
      training.num_generations: [4, 8, 16]
      training.beta: [0.0, 0.04]
      names: {G4-beta0: small-group}     # optional: a derived name -> the name to use instead

Every combination of the values is a *variant* (here 6): the base ``training`` section with the swept keys set to
the variant's values. Its name is derived from the values (``G4-beta0.04``; see :data:`PREFIX`) unless ``names``
gives one, and appears in paths (``.../s0/v-G4-beta0.04/``), tables (the ``variant`` column) and figure legends.
Selection, scoring, verification and the base model's evaluation do not depend on training settings, so they are
shared by every variant; only training, the arms' evaluation and the aggregates multiply. A selection policy that
depends on the group size (``learnable``) selects with the base, unswept ``training.num_generations``.

Without a ``sweep:`` block there are no variants and every path and output is what it was before sweeps existed.
"""

from __future__ import annotations

import itertools
import re
from copy import deepcopy
from dataclasses import dataclass

from grpo_budget.errors import UserError

NAMES_KEY = "names"
ONLY_KEY = "only"  # the variants kept, by name (derived or given); all combinations without it
KEY_REGEX = r"^training(\.[a-z][a-z0-9_]*){1,2}$"
NAME_REGEX = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
# How a swept setting shows in a derived variant name (the setting's last name otherwise); "" = the value alone.
PREFIX = {
    "training.num_generations": "G",
    "training.beta": "beta",
    "training.learning_rate": "lr",
    "training.prompts_per_step": "P",
    "training.lora.r": "r",
    "training.lora.alpha": "alpha",
    "training.lora.target_modules": "",
    "training.lora.layers": "layers",
    "training.dynamic_sampling": "dynamic-",
    "training.method": "",
}
# How a swept setting is labelled on a figure's axis.
LABEL = {
    "training.num_generations": "group size G",
    "training.beta": "KL coefficient β",
    "training.learning_rate": "learning rate",
    "training.lora.r": "LoRA rank r",
    "training.lora.target_modules": "LoRA target modules",
    "training.lora.layers": "LoRA layers",
    "training.dynamic_sampling": "dynamic sampling",
    "training.method": "training method",
}


@dataclass(frozen=True)
class Variant:
    name: str
    values: dict  # dotted setting path -> this variant's value, in the sweep's key order


def axes(config: dict) -> dict[str, list]:
    """The swept settings and their values, in config order (empty without a sweep)."""
    return {k: v for k, v in (config.get("sweep") or {}).items() if k not in (NAMES_KEY, ONLY_KEY)}


def has_sweep(config: dict) -> bool:
    return bool(axes(config))


def label(key: str) -> str:
    return LABEL.get(key, key.removeprefix("training."))


def format_value(value) -> str:
    """A value as it reads in a variant name and on a figure's axis: 0.04 -> "0.04", 1e-05 -> "1e-05",
    [0, 11] -> "0-11", [q_proj, v_proj] -> "q_proj.v_proj", {layers: [0, 3]} -> "layers0-3", None -> "all"."""
    if value is None:  # e.g. training.lora.layers: null, every layer
        return "all"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return format(value, "g")
    if isinstance(value, (list, tuple)):
        sep = "-" if all(isinstance(v, int) and not isinstance(v, bool) for v in value) else "."
        return sep.join(format_value(v) for v in value)
    if isinstance(value, dict):
        return "-".join(f"{k}{format_value(v)}" for k, v in value.items())
    return str(value)


def derived_name(values: dict) -> str:
    parts = []
    for key, value in values.items():
        if value is None:  # the unset setting (e.g. every layer) goes without saying
            continue
        prefix = PREFIX.get(key, key.rsplit(".", 1)[-1])
        parts.append(prefix + format_value(value))
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(parts)) or "base"
    return name if re.match(r"[A-Za-z0-9]", name) else "v" + name


def variants(config: dict) -> list[Variant]:
    """Every combination of the swept values, named (derived or given); empty without a sweep."""
    ax = axes(config)
    if not ax:
        return []
    given = (config.get("sweep") or {}).get(NAMES_KEY) or {}
    only = (config.get("sweep") or {}).get(ONLY_KEY)
    out = []
    for combo in itertools.product(*ax.values()):
        values = dict(zip(ax, combo))
        name = given.get(derived_name(values), derived_name(values))
        if only is None or name in only:
            out.append(Variant(name, values))
    return out


def names(config: dict) -> list[str]:
    return [v.name for v in variants(config)]


def set_path(section: dict, dotted: str, value) -> dict:
    """A copy of ``section`` (the config's ``training``) with ``training.a.b`` set to ``value``."""
    out = deepcopy(section)
    node = out
    keys = dotted.split(".")[1:]
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = deepcopy(value)
    return out


def apply(training: dict, values: dict) -> dict:
    """The base training section with a variant's values set."""
    out = deepcopy(training)
    for key, value in values.items():
        out = set_path(out, key, value)
    return out


def variant(config: dict, name: str) -> Variant:
    for v in variants(config):
        if v.name == name:
            return v
    raise UserError(f"unknown sweep variant {name!r}; allowed: {', '.join(names(config)) or '(no sweep configured)'}")


def training_of(config: dict, name: str | None) -> dict:
    """A variant's effective training section (the base section without a variant name)."""
    if not name:
        return config["training"]
    return apply(config["training"], variant(config, name).values)


