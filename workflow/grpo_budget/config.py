"""Configuration: JSON-schema validation with defaults filled in, plus the checks a schema cannot express.

Every error names the field and what is allowed, and is raised before any job starts.
"""

from __future__ import annotations

import importlib
from copy import deepcopy
from functools import lru_cache
from pathlib import Path

import yaml

from .errors import UserError

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"


class ConfigError(UserError):
    """A configuration that cannot run; the message names the field and the allowed values."""


BOOTSTRAP = ("models", "*", "bootstrap")  # the schema path of a model's bootstrap entry

def _names(module: str, registry: str):
    """The names of a registry, imported when called, so that importing this module stays light."""
    return lambda: list(getattr(importlib.import_module(f"grpo_budget.{module}"), registry))


# Enums of the schema that come from the package's registries (the schema file leaves them open).
REGISTRY_ENUMS = {
    ("policies", "*"): lambda: importlib.import_module("grpo_budget.selection").arm_names(),
    ("datasets", "*", "benchmark"): _names("loaders", "BENCHMARKS"),
    ("datasets", "*", "generator"): _names("prepare", "GENERATORS"),
}


def section_schema(schema: dict, pointer: tuple[str, ...]) -> dict:
    """The sub-schema at ``pointer`` (property names; ``*`` = any key of a mapping or any item of a list)."""
    node = schema
    for key in pointer:
        if key == "*":
            node = node["items"] if node.get("type") == "array" else node["additionalProperties"]
        else:
            node = node["properties"][key]
    return node


@lru_cache(maxsize=1)
def _schema_file() -> dict:
    # Parsed once per process: settings objects fill their defaults from it many times per job.
    return yaml.safe_load(SCHEMA_PATH.read_text())


def load_schema() -> dict:
    """The config schema (a fresh copy), with the registries' names as the enums of policies, benchmarks and
    generators (read at each call, so that a registry entry added at run time is allowed)."""
    schema = deepcopy(_schema_file())
    for pointer, names in REGISTRY_ENUMS.items():
        section_schema(schema, pointer)["enum"] = names()
    return schema


def fill(pointer: tuple[str, ...], values: dict) -> dict:
    """``values`` validated against the schema section at ``pointer``, with its defaults filled in (a copy)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    sub = section_schema(load_schema(), pointer)
    out = deepcopy(values)
    error = best_match(_with_defaults(Draft202012Validator)(sub).iter_errors(out))
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
    _check_inputs(config)
    from .sweep import check as check_sweep

    check_sweep(config)  # every variant of a `sweep:` block, before any job starts
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
            from .loaders import BENCHMARKS

            raise ConfigError(f"config field '{where}.benchmark' is required for source: benchmark; "
                              f"allowed: {', '.join(BENCHMARKS)}")
        for i, other in enumerate(ds.get("ood", [])):
            if other not in datasets:
                raise ConfigError(f"config field '{where}.ood[{i}]': unknown dataset {other!r}; allowed: {names}")
    window = cfg["analysis"]["learnable_window"]
    if isinstance(window, float) and window > 1:
        raise ConfigError(f"config field 'analysis.learnable_window': {window} is neither a fraction in (0, 1] nor "
                          f"a count; allowed: a count of steps without a decimal point ({int(window)})")
    tr = cfg["training"]
    if tr["prompts_per_step"] % tr["gradient_accumulation_steps"]:
        raise ConfigError(f"config field 'training.gradient_accumulation_steps': {tr['gradient_accumulation_steps']} "
                          f"does not divide training.prompts_per_step ({tr['prompts_per_step']}); allowed: a divisor")
    sc = cfg["scoring"]
    if sc["verify_samples"] and sc["verify_seed"] == sc["seed"]:
        raise ConfigError(f"config field 'scoring.verify_seed': {sc['verify_seed']} equals scoring.seed, so the "
                          "verification would repeat the scoring samples; allowed: any other seed")
    if {"tiers", "random_matched"} & set(cfg["policies"]):
        for name, ds in datasets.items():
            if not ds.get("eval_only") and not ds.get("tiers"):
                raise ConfigError(f"config field 'datasets.{name}.tiers' is required by policies tiers and "
                                  "random_matched; allowed: {column: COLUMN, values: [...]}")
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
    _check_sources(cfg)
    for i, budget in enumerate(cfg["budgets"]):
        if isinstance(budget, float) and budget > 1:  # JSON Schema counts 100.0 as an integer
            raise ConfigError(f"config field 'budgets[{i}]': {budget} is neither a fraction in (0, 1] nor a count; "
                              f"allowed: a count without a decimal point ({int(budget)}) or a fraction in (0, 1]")
        if isinstance(budget, int):
            for name in trainable:
                size = pool_size(datasets[name])
                if size is not None and budget > size:
                    raise ConfigError(f"config field 'budgets[{i}]': {budget} items is above the pool size of "
                                      f"dataset {name!r} ({size}); allowed: a count ≤ {size} or a fraction in (0, 1]")


def _check_sources(cfg: dict) -> None:
    """Difficulty sources: a proxy where an arm needs one, gold answers where an arm ranks by them, and adaptive
    scoring only for label sources (its rounds are allocated by graded pass rates)."""
    from .labelfree import SOURCES, split_arm
    from .selection import policy_of

    models = ", ".join(cfg["models"])
    if not any(m.get("train", True) for m in cfg["models"].values()):
        raise ConfigError("config field 'models': every model has train: false; at least one must be trained")
    sc = cfg["scoring"]
    if sc["proxy"] is not None and sc["proxy"] not in cfg["models"]:
        raise ConfigError(f"config field 'scoring.proxy': unknown model {sc['proxy']!r}; allowed: {models}")
    ranking = [(arm, split_arm(arm, sc["difficulty"])[1]) for arm in cfg["policies"]
               if policy_of(arm).ranks]
    for arm, source in ranking:
        if SOURCES[source].proxy and sc["proxy"] is None:
            raise ConfigError(f"config field 'scoring.proxy' is required by arm {arm!r} (difficulty source {source}); "
                              f"allowed: a key of models ({models})")
        if sc["adaptive"] is not None and not SOURCES[source].labels:
            raise ConfigError(f"config field 'scoring.adaptive': adaptive rounds are allocated by graded pass rates, so "
                              f"the label-free arm {arm!r} would rank by samples chosen with gold answers; allowed: "
                              "null (fixed num_samples) with label-free arms")
    for name, ds in cfg["datasets"].items():
        if not ds.get("answers") or ds.get("eval_only"):
            continue
        for arm, source in ranking:
            if SOURCES[source].labels:
                raise ConfigError(f"config field 'datasets.{name}.answers': the pool is unlabeled, but arm {arm!r} "
                                  f"ranks by gold answers (source {source}); allowed: label-free arms "
                                  f"({split_arm(arm)[0]}@agreement, {split_arm(arm)[0]}@proxy_agreement)")
        if not Path(ds["answers"]).exists():
            raise ConfigError(f"config field 'datasets.{name}.answers': {ds['answers']!r} does not exist (relative "
                              f"paths are read from {Path.cwd()}); allowed: a file with columns id and answer")


def _check_inputs(cfg: dict) -> None:
    """What can be checked without running: local paths exist, regexes compile, generator knobs agree, every
    budget fills one training step. Hub ids are left to the job."""
    import re

    for mname, model in cfg["models"].items():
        path = model.get("path")
        if path and _looks_local(path) and not Path(path).exists():
            raise ConfigError(f"config field 'models.{mname}.path': {path!r} does not exist; allowed: a local "
                              "model folder or a hub id such as Qwen/Qwen3-4B")
    for name, ds in cfg["datasets"].items():
        where = f"datasets.{name}"
        pattern = ds["grading"].get("pattern")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as e:
                raise ConfigError(f"config field '{where}.grading.pattern': {pattern!r} is not a valid regular "
                                  f"expression ({e}); allowed: a Python regex whose first group is the answer")
        files = ds.get("spec", {}).get("data_files")
        for f in (files.values() if isinstance(files, dict) else [files]) if files is not None else []:
            for one in [f] if isinstance(f, str) else f:
                if "*" not in str(one) and not Path(one).exists():
                    raise ConfigError(f"config field '{where}.spec.data_files': {one!r} does not exist "
                                      f"(relative paths are read from {Path.cwd()}); allowed: existing files or folders")
        if ds.get("generator") == "frame_arithmetic":
            from .framearith import resolve_params

            try:
                p = resolve_params(ds.get("params", {}))
            except ValueError as e:
                raise ConfigError(f"config field '{where}.params': {e}") from None
            if not 1 <= p["min_ops"] <= p["max_ops"] <= p["width"]:
                raise ConfigError(f"config field '{where}.params': need 1 <= min_ops <= max_ops <= width, got "
                                  f"min_ops={p['min_ops']}, max_ops={p['max_ops']}, width={p['width']}")
    per_step = cfg["training"]["prompts_per_step"]
    from .selection import budget_size, fixed_size

    if all(fixed_size(p) for p in cfg["policies"]):
        return
    for i, budget in enumerate(cfg["budgets"]):
        for name, ds in cfg["datasets"].items():
            size = pool_size(ds)
            if ds.get("eval_only") or (size is None and not isinstance(budget, int)):
                continue
            n = budget if isinstance(budget, int) else budget_size(budget, size, cfg["budget_rounding"])
            if n < per_step:
                raise ConfigError(f"config field 'budgets[{i}]': {budget} buys {n} item(s) of dataset {name!r}, "
                                  f"fewer than one training step needs (training.prompts_per_step = {per_step}); "
                                  f"allowed: a budget of at least {per_step} items, or a smaller prompts_per_step")


def _looks_local(path: str) -> bool:
    """A path rather than a hub id: absolute, relative with ./ or ../, ~, or its first part is a local folder."""
    return path.startswith(("/", "./", "../")) or Path(path).exists() or Path(path.split("/")[0]).is_dir()


def pool_size(ds: dict) -> int | None:
    """The pool size a dataset entry promises, where the config says it."""
    if "pool_size" in ds:
        return int(ds["pool_size"])
    return ds.get("spec", {}).get("pool_size")


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
    return validate(cfg)
