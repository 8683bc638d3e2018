"""Checks of a config that its schema cannot express (datasets, sources, inputs, sweep variants), before any job
starts; each refusal is a one-line :class:`~grpo_budget.config.schema.ConfigError` naming the field."""

from __future__ import annotations

import re
from copy import deepcopy
from pathlib import Path

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from grpo_budget import model_folder
from grpo_budget.config import schema
from grpo_budget.config.schema import ConfigError
from grpo_budget.config.settings import Training
from grpo_budget.errors import UserError
from grpo_budget.experiment import datacheck, registries
from grpo_budget.experiment.datacheck import files_entry
from grpo_budget.experiment.sweep import (NAME_REGEX, NAMES_KEY, ONLY_KEY, apply, axes, derived_name, format_value,
                                          variants)
from grpo_budget.prepare.benchmarks import BENCHMARKS
from grpo_budget.generation import rewards
from grpo_budget.prepare.framearith import resolve_params
from grpo_budget.prepare.splits import GENERATORS
from grpo_budget.select.policies import budget_size, fixed_size, policy_of
from grpo_budget.select.sources import SOURCES, split_arm
from grpo_budget.train import objective
from grpo_budget.train.methods import method_of


def semantics(cfg: dict) -> None:
    """Datasets, analysis, training, scoring, policies, bootstrap models and budgets agree with each other."""
    datasets = cfg["datasets"]
    names = ", ".join(sorted(datasets))
    for name, ds in datasets.items():
        where = f"datasets.{name}"
        if ds["source"] == "builtin":
            for key in ("generator", "pool_size", "test_size"):
                if key not in ds and not (key == "pool_size" and ds.get("eval_only")):
                    raise ConfigError(f"config field '{where}.{key}' is required for source: builtin")
        elif ds["source"] == "files":
            files_entry(where, ds)
        elif "benchmark" not in ds:
            raise ConfigError(f"config field '{where}.benchmark' is required for source: benchmark; "
                              f"allowed: {', '.join(BENCHMARKS)}")
        if ds["source"] != "files" and "answer_type" in ds:
            raise ConfigError(f"config field '{where}.answer_type' is read only by source: files (a benchmark's answer "
                              "type is its own, a built-in task's too); allowed: source: files for your own rows")
        for i, other in enumerate(ds.get("ood", [])):
            if other not in datasets:
                raise ConfigError(f"config field '{where}.ood[{i}]': unknown dataset {other!r}; allowed: {names}")
    window = cfg["analysis"]["learnable_window"]
    if isinstance(window, float) and window > 1:
        raise ConfigError(f"config field 'analysis.learnable_window': {window} is neither a fraction in (0, 1] nor "
                          f"a count; allowed: a count of steps without a decimal point ({int(window)})")
    _names(cfg)
    tr = cfg["training"]
    if tr["use_vllm"] and tr["vllm_mode"] == "server":
        raise ConfigError("config field 'training.vllm_mode': server needs a `trl vllm-serve` process on its own GPUs, "
                          "which the workflow does not start (training would stop on a ConnectionError after 240 s); "
                          "allowed: colocate")
    if tr["prompts_per_step"] % tr["gradient_accumulation_steps"]:
        raise ConfigError(f"config field 'training.gradient_accumulation_steps': {tr['gradient_accumulation_steps']} "
                          f"does not divide training.prompts_per_step ({tr['prompts_per_step']}); allowed: a divisor")
    t = Training.from_dict(tr)
    problem = method_of(t).batch_problem(t, t.gradient_accumulation_steps) or objective.settings_problem(t)
    if problem:
        raise ConfigError(f"config field 'training.{problem[0]}': {problem[1]}")
    if t.dynamic_sampling and t.dynamic_metric == "accuracy" and "correct" not in t.rewards:
        raise ConfigError("config field 'training.dynamic_metric': accuracy filters on the correct reward, which "
                          "training.rewards lacks; allowed: reward, or the correct reward in training.rewards")
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
    _sources(cfg)
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


def _names(cfg: dict) -> None:
    """Names a registry or the config defines that the schema leaves open: the rewards, each generator's knobs, the
    test sets of a per-set analysis.stratify_by (otherwise a misspelling fails late, in a job, or silently does
    nothing)."""
    try:
        rewards.check(cfg["training"]["rewards"])
    except UserError as e:
        raise ConfigError(str(e)) from None
    for name, ds in cfg["datasets"].items():
        generator = GENERATORS.get(ds.get("generator", ""))
        unknown = sorted(set(ds.get("params") or {}) - set(generator.params)) if generator else []
        if unknown:
            raise ConfigError(f"config field 'datasets.{name}.params': unknown {ds['generator']} knob "
                              f"{unknown[0]!r}; allowed: {', '.join(generator.params)}")
    stratify = cfg["analysis"]["stratify_by"]
    for key in stratify if isinstance(stratify, dict) else []:
        if key not in cfg["datasets"]:
            raise ConfigError(f"config field 'analysis.stratify_by.{key}': no test set is named {key!r}; allowed: "
                              f"{', '.join(sorted(cfg['datasets']))}")


def _sources(cfg: dict) -> None:
    """Difficulty sources: a proxy where an arm needs one, gold answers where an arm ranks by them, and adaptive
    scoring only for label sources (its rounds are allocated by graded pass rates)."""
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
        if cfg["analysis"]["drift"]:
            raise ConfigError(f"config field 'analysis.drift': the pool of dataset {name!r} is unlabeled "
                              f"(datasets.{name}.answers), so its scores hold no correct counts to move from; "
                              "allowed: false with an unlabeled pool")
        for arm, source in ranking:
            if SOURCES[source].labels:
                raise ConfigError(f"config field 'datasets.{name}.answers': the pool is unlabeled, but arm {arm!r} "
                                  f"ranks by gold answers (source {source}); allowed: label-free arms "
                                  f"({split_arm(arm)[0]}@agreement, {split_arm(arm)[0]}@proxy_agreement)")
        if not Path(ds["answers"]).exists():
            raise ConfigError(f"config field 'datasets.{name}.answers': {ds['answers']!r} does not exist (relative "
                              f"paths are read from {Path.cwd()}); allowed: a file with columns id and answer")


def inputs(cfg: dict) -> None:
    """What can be checked without running: local paths exist (a model folder with what loading it needs), regexes
    compile, generator knobs agree, every budget fills one training step. Hub ids are left to the job."""
    for mname, model in cfg["models"].items():
        path = model.get("path")
        if path and _looks_local(path) and not Path(path).exists():
            raise ConfigError(f"config field 'models.{mname}.path': {path!r} does not exist; allowed: a local "
                              "model folder or a hub id such as Qwen/Qwen3-4B")
        why = model_folder.problem(path) if path and Path(path).is_dir() else None
        if why:
            raise ConfigError(f"config field 'models.{mname}.path': {why}")
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
        datacheck.check(name, ds)  # a few rows of each local file, read as the prepare job will
        if ds.get("generator") == "frame_arithmetic":
            try:
                p = resolve_params(ds.get("params", {}))
            except ValueError as e:
                raise ConfigError(f"config field '{where}.params': {e}") from None
            if not 1 <= p["min_ops"] <= p["max_ops"] <= p["width"]:
                raise ConfigError(f"config field '{where}.params': need 1 <= min_ops <= max_ops <= width, got "
                                  f"min_ops={p['min_ops']}, max_ops={p['max_ops']}, width={p['width']}")
    datacheck.functions(cfg)  # your own grading and reward functions, on a few of the data's rows
    per_step = cfg["training"]["prompts_per_step"]
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


def sweep(config: dict) -> None:
    """Refuse a sweep that could not run, before any job starts: every value is checked against the schema of its
    setting (``sweep.training.beta[1]`` names the culprit), every variant's whole training section against the
    schema and the checks the schema cannot express, and the names are valid and distinct."""
    block = config.get("sweep")
    if block is None:
        return
    ax = axes(config)
    if not ax:
        raise ConfigError("config field 'sweep': names no setting; allowed: training settings by their "
                                  "dotted path with a list of values, e.g. training.num_generations: [4, 8]")
    full = registries.schema()
    for key, values in ax.items():
        pointer = tuple(key.split("."))
        try:
            sub = schema.section_schema(full, pointer)
        except KeyError:
            allowed = sorted(schema.section_schema(full, ("training",))["properties"])
            raise ConfigError(
                f"config field 'sweep.{key}': {key!r} is not a training setting; allowed: training.<setting> or "
                f"training.lora.<setting>, settings: {', '.join(allowed)}") from None
        for i, value in enumerate(values):
            msg = _schema_error(sub, value)
            if msg:
                raise ConfigError(f"config field 'sweep.{key}[{i}]': {msg}")
        if len({repr(v) for v in values}) < len(values):
            raise ConfigError(f"config field 'sweep.{key}': lists a value twice; allowed: distinct values")
    derived = [derived_name(v.values) for v in variants({**config, "sweep": {k: v for k, v in ax.items()}})]
    given = block.get(NAMES_KEY) or {}
    for old, new in given.items():
        if old not in derived:
            raise ConfigError(f"config field 'sweep.names.{old}': no variant has that derived name; "
                                      f"allowed: {', '.join(derived)}")
        if not re.fullmatch(NAME_REGEX, str(new)):
            raise ConfigError(f"config field 'sweep.names.{old}': {new!r} is not a valid name; allowed: "
                                      "letters, digits, _ . - (starting with a letter or digit)")
    every = [v.name for v in variants({**config, "sweep": {k: v for k, v in block.items() if k != ONLY_KEY}})]
    for i, name in enumerate(block.get(ONLY_KEY) or []):
        if name not in every:
            raise ConfigError(f"config field 'sweep.only[{i}]': no variant is named {name!r}; allowed: "
                              f"{', '.join(every)}")
    seen: dict[str, dict] = {}
    for v in variants(config):
        if v.name in seen:
            raise ConfigError(f"config field 'sweep.names': two variants are named {v.name!r} "
                                      f"({seen[v.name]} and {v.values}); allowed: distinct names")
        seen[v.name] = v.values
        training = apply(config["training"], v.values)
        try:
            schema.fill(("training",), training, full)
            variant_cfg = {**config, "training": training}
            semantics(variant_cfg)
            inputs(variant_cfg)
        except ConfigError as e:
            raise ConfigError(f"sweep variant {v.name} ({_describe(v.values)}): {e}") from None


def _describe(values: dict) -> str:
    return ", ".join(f"{k} = {format_value(v)}" for k, v in values.items())


def _schema_error(sub: dict, value) -> str | None:
    error = best_match(Draft202012Validator(sub).iter_errors(deepcopy(value)))
    if error is None:
        return None
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    desc = sub.get("description")
    return f"{error.message}{' at ' + where if where else ''}" + (f"; allowed: {desc}" if desc else "")
