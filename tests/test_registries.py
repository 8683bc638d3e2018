"""Registries, the plan and the schema agree: one place per name, one source per default, one budget label."""

from __future__ import annotations

import copy
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from grpo_budget.aggregate import outputs, run
from grpo_budget.aggregate.read import sort_arms
from grpo_budget.cluster import jobs
from grpo_budget.config import schema, settings
from grpo_budget.experiment import config, plan, registries
from grpo_budget.generation.backends import BACKENDS
from grpo_budget.generation.grading import ANSWER_TYPES, MODES
from grpo_budget.generation.rewards import REWARDS
from grpo_budget.prepare.benchmarks import BENCHMARKS
from grpo_budget.prepare.splits import GENERATORS
from grpo_budget.select.policies import POLICIES, ROUNDING, Policy, select
from grpo_budget.select.sources import SOURCES
from grpo_budget.train import guidance, guided, offpolicy
from grpo_budget.train.capping import AT_CAP, METRICS
from grpo_budget.train.methods import METHODS
from grpo_budget.train.objective import IS_MODES
from grpo_budget.train.reporting import REPORT_TARGETS

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = yaml.safe_load((ROOT / "config.yaml").read_text())


def schema_props(pointer):
    return set(schema.section_schema(schema.raw(), pointer)["properties"])


# Every config field that names a registry's entries, and the registry.
REGISTRY_FIELDS = {
    ("datasets", "*", "benchmark"): list(BENCHMARKS),
    ("datasets", "*", "generator"): list(GENERATORS),
    ("datasets", "*", "answer_type"): list(ANSWER_TYPES),
    ("datasets", "*", "grading", "mode"): list(MODES),
    ("scoring", "difficulty"): list(SOURCES),
    ("budget_rounding",): list(ROUNDING),
    ("backend",): list(BACKENDS),
    ("training", "method"): list(METHODS),
    ("training", "report_to"): list(REPORT_TARGETS),
    ("training", "codapo_resample"): list(METHODS["codapo"].choices["codapo_resample"]),
    ("training", "guidance_when"): list(guided.GUIDE_WHEN),
    ("training", "guidance_place"): list(guidance.PLACES),
    ("training", "guidance_objective"): list(offpolicy.FORMS),
    ("training", "guidance_gamma_over"): list(offpolicy.GAMMA_OVER),
    ("training", "dynamic_at_cap"): list(AT_CAP),
    ("training", "dynamic_metric"): list(METRICS),
    ("training", "vllm_importance_sampling_mode"): list(IS_MODES),
}


def test_schema_enums_are_the_registries():
    full = registries.schema()
    arms = schema.section_schema(full, ("policies", "*"))["enum"]
    assert arms[: len(POLICIES)] == list(POLICIES)  # the policies, then POLICY@SOURCE for those that rank
    assert arms[len(POLICIES):] == [f"{p}@{s}" for p in POLICIES if POLICIES[p].ranks for s in SOURCES]
    for pointer, names in REGISTRY_FIELDS.items():
        assert schema.section_schema(full, pointer)["enum"] == names, pointer
    # a reward is a key of training.rewards: the registry's names, or your own function's import path, which the
    # schema leaves open for rewards.check (before any job, test below)
    assert registries.enums()[("training", "rewards")] == list(REWARDS)
    assert "propertyNames" not in schema.section_schema(full, ("training", "rewards"))
    # the table covers them all, and the schema file itself names none of them: nothing to keep in sync by hand
    assert set(registries.enums()) == set(REGISTRY_FIELDS) | {("policies", "*"), ("training", "rewards")}
    raw = yaml.safe_load(schema.SCHEMA_PATH.read_text())
    for pointer in registries.enums():
        node = schema.section_schema(raw, pointer)
        assert "enum" not in node and "propertyNames" not in node, pointer


@pytest.mark.parametrize("field, value", [("training.rewards", {"corect": 1.0}), ("training.method", "grop"),
                                          ("scoring.difficulty", "lables"), ("backend", "vlm"),
                                          ("budget_rounding", "half"), ("training.report_to", "tensorbord"),
                                          ("training.guidance_when", "fail"), ("training.guidance_objective", "shaping"),
                                          ("training.dynamic_at_cap", "fil"), ("training.dynamic_metric", "acc"),
                                          ("training.vllm_importance_sampling_mode", "sequence_masked")])
def test_a_misspelled_registry_name_is_refused_in_one_line_listing_what_is_available(field, value):
    cfg = copy.deepcopy(DEFAULT)
    section, _, key = field.rpartition(".")
    (cfg.setdefault(section, {}) if section else cfg)[key] = value
    with pytest.raises(schema.ConfigError) as e:
        config.validate(cfg)
    message = str(e.value)
    assert "\n" not in message and f"config field '{field}'" in message and "allowed: " in message
    names = {"training.rewards": REWARDS, "training.method": METHODS, "scoring.difficulty": SOURCES,
             "backend": BACKENDS, "budget_rounding": ROUNDING, "training.report_to": REPORT_TARGETS,
             "training.guidance_when": guided.GUIDE_WHEN, "training.guidance_objective": offpolicy.FORMS,
             "training.dynamic_at_cap": AT_CAP, "training.dynamic_metric": METRICS,
             "training.vllm_importance_sampling_mode": IS_MODES}[field]
    quoted = (lambda n: n) if field == "training.rewards" else repr  # rewards.check lists them as the YAML is written
    assert all(quoted(n) in message for n in names), message


@pytest.mark.parametrize("cls", list(settings.SECTIONS))
def test_settings_classes_have_exactly_their_schema_fields(cls):
    fields = {f.name for f in dataclasses.fields(cls)} - set(settings.JOB_EXTRAS) - {"method_settings"}
    methods_own = {k for m in METHODS.values() for k in m.settings} if cls is settings.Training else set()
    assert fields | methods_own == schema_props(settings.SECTIONS[cls])
    assert not fields & methods_own  # a method's settings are its own (grpo_budget.train.methods), not the class's


def test_the_settings_restate_no_default():
    """Every default of a settings object comes from the schema: no dataclass field has one of its own."""
    for cls in [*settings.SECTIONS, settings.Generation]:
        own = [f.name for f in dataclasses.fields(cls)
               if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING]
        assert own == [], cls.__name__


def test_every_schema_default_reaches_the_settings_objects():
    t = settings.Training.from_dict({})
    assert t.max_completion_length == 256 and t.num_generations == 8 and t.lora.r == 16
    g = settings.Generation.from_dict({}, "evaluation")
    assert (g.num_samples, g.seed, g.backend, g.max_lora_rank) == (1, 1234, "transformers", 16)
    assert settings.Generation.from_dict({}, "scoring").num_samples == 8
    gen_fields = {f.name for f in dataclasses.fields(settings.Generation)}
    assert ({p for p in schema_props(("scoring",)) if not p.startswith("verify_")} - {"adaptive"}
            - set(jobs.SELECTION_ONLY)) <= gen_fields
    assert {p for p in schema_props(("evaluation",)) if not p.startswith("ood_")} <= gen_fields
    assert settings.Bootstrap.from_dict({"dataset": "x"}).hidden_size == 128
    assert settings.Analysis.from_dict(None).learnable_window == 1


def test_a_bad_partial_section_names_its_field():
    with pytest.raises(schema.ConfigError, match=r"training\.num_generations"):
        settings.Training.from_dict({"num_generations": 1})


def test_every_output_has_its_caption_and_known_file_roles():
    captions = {p.stem for p in outputs.CAPTIONS.glob("*.rst")}
    assert captions == set(run.OUTPUTS)
    for name, out in run.OUTPUTS.items():
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name) and out.kind in ("summary", "table", "figure")
        assert out.reads <= set(plan.READS)
        assert "{{" not in outputs.caption(name, config.validate(copy.deepcopy(DEFAULT)))


def test_policy_registry_entries_all_select():
    scores = pd.DataFrame({"id": [f"i{k}" for k in range(20)], "pass_rate": np.linspace(0, 1, 20),
                           "n_correct": np.arange(20), "n_samples": 19, "level": [1, 2, 3, 4] * 5})
    for name, policy in POLICIES.items():
        out = select(scores, name, 5, seed=0, tiers={"column": "level", "values": [1, 2]}, num_generations=8)
        assert len(out) == (len(scores) if name == "full" else 10 if policy.size else 5), name
        assert (out["policy"] == name).all()
        other = select(scores, name, 5, seed=1, tiers={"column": "level", "values": [1, 2]}, num_generations=8)
        # a ranking policy's seed only breaks ties; of the others, only a seeded one buys other items with another
        # seed (the cost plan relies on it)
        assert policy.seeded == (not policy.ranks and set(out["id"]) != set(other["id"])), name
    assert len({p.color for p in POLICIES.values()}) == len(POLICIES)


def test_a_new_policy_is_one_registry_entry(monkeypatch):
    """What the README's Extending section promises: register it, and the config, the selection and the
    Snakefile's wildcard accept it."""
    monkeypatch.setitem(POLICIES, "top_half", Policy(lambda pool, n: pool.order[::-1][: len(pool.order) // 2],
                                                     "#000000", size=lambda pool: len(pool.scores) // 2))
    cfg = config.validate({**copy.deepcopy(DEFAULT), "policies": ["top_half", "hard"]})
    assert {r["policy"] for r in plan.grid(cfg)} == {"top_half", "hard"}
    assert {r["budget"] for r in plan.grid(cfg) if r["policy"] == "top_half"} == {plan.FULL_LABEL}
    scores = pd.DataFrame({"id": list("abcd"), "pass_rate": [0.1, 0.9, 0.5, 0.7]})
    assert set(select(scores, "top_half", 1.0, 0)["id"]) == {"b", "d"}


@pytest.mark.parametrize("budget, label", [(0.1, "0.1"), (1e-05, "1e-05"), (100, "100"), (1.0, "1.0"), (0.25, "0.25")])
def test_budget_label_round_trips_through_the_wildcard(budget, label):
    assert plan.format_budget(budget) == label
    assert re.fullmatch(plan.BUDGET_REGEX, label)
    assert plan.parse_budget(label) == budget and type(plan.parse_budget(label)) is type(budget)


def test_budgets_sort_numerically():
    labels = ["100", "25", "all", "0.5", "0.05", "1e-05"]
    assert sorted(labels, key=plan.budget_sort_key) == ["1e-05", "0.05", "0.5", "25", "100", "all"]
    df = pd.DataFrame({"model": "m", "dataset": "d", "policy": "hard", "budget": ["100", "25", "0.5"]})
    assert list(sort_arms(df)["budget"]) == ["0.5", "25", "100"]


def test_tiny_fraction_and_counts_build_their_dag(tmp_path):
    cfg = copy.deepcopy(DEFAULT)
    cfg.update(results=str(tmp_path / "r"), budgets=[1.0e-05, 100, 25], policies=["hard"])
    cfg["training"]["prompts_per_step"] = 1
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "hard/b1e-05/s0/subset.parquet" in out.stdout and "hard/b25/s0" in out.stdout


@pytest.mark.slow
def test_a_grid_ten_times_difficulty_limits_builds_and_aggregates_read_a_file(tmp_path):
    cfg = yaml.safe_load((ROOT / "configs/difficulty-limits.yaml").read_text())
    cfg["seeds"] = list(range(10 * len(cfg["seeds"])))
    cfg["results"] = str(tmp_path / "r")
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", str(tmp_path / "r/summary.csv"),
                          "--configfile", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    assert not (tmp_path / "r").exists()  # a dry run writes nothing: the run writes the listing, in its lock
    validated = config.load(path)
    listing_path, text = plan.listing_file(plan.listing(validated), validated["results"])
    Path(listing_path).parent.mkdir(parents=True)
    Path(listing_path).write_text(text)
    assert len(plan.Listing.read(listing_path).runs) == 10 * 54
    shell = [line for line in out.stdout.splitlines() if "aggregate summary --listing" in line]
    assert shell and len(shell[0]) < 4000  # the listing travels as a file, not as an argument


def test_trainer_string_enums_are_what_the_installed_transformers_and_trl_accept():
    """training.lr_scheduler_type and loss_type list exactly transformers' SchedulerType values and the loss types
    TRL's GRPOConfig documents as supported (a typo used to surface as a traceback in the train job)."""
    import re

    from transformers.trainer_utils import SchedulerType
    from trl import GRPOConfig

    raw = yaml.safe_load(schema.SCHEMA_PATH.read_text())
    training = raw["properties"]["training"]["properties"]
    assert training["lr_scheduler_type"]["enum"] == [s.value for s in SchedulerType]
    help_text = GRPOConfig.__dataclass_fields__["loss_type"].metadata["help"]
    supported = re.search(r"Supported values are (.*?)\. ", help_text).group(1)
    assert set(training["loss_type"]["enum"]) == set(re.findall(r"'(\w+)'", supported))
