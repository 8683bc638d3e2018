"""The experiment plan: the grid of runs, every path pattern, the budget label, the run listing the aggregate stage
reads, and where each model is loaded from. Pure functions of the validated config; ``common.smk`` only looks things
up here (a job's settings: :mod:`grpo_budget.cluster.jobs`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace

from grpo_budget.config import records
from grpo_budget.experiment import sweep
from grpo_budget.experiment.budget import (  # noqa: F401  (budget labels, re-exported: callers read them here)
    BUDGET_REGEX, FULL_LABEL, budget_sort_key, format_budget, parse_budget)
from grpo_budget.hub import fetched, store_folder
from grpo_budget.io import RESULTS, read_json, relative
from grpo_budget.paths import (  # noqa: F401  (the path patterns, re-exported: the plan's callers read them here)
    PATTERNS, PER_VARIANT, RUN_DIR, RUN_NAME, VARIANT_DIR, paths)
from grpo_budget.select.policies import fixed_size
from grpo_budget.select.sources import SOURCES, split_arm


def config_paths(config: dict) -> SimpleNamespace:
    """The path patterns of a validated config (with a variant level when it sweeps)."""
    return paths(config["results"], sweep.has_sweep(config))


def run_name(config: dict) -> str:
    """The log and benchmark file name pattern of a training or evaluation job."""
    return RUN_NAME + ("_v-{variant}" if sweep.has_sweep(config) else "")


# ---------------------------------------------------------------------------------------------------------------
# The grid


def budget_labels(config: dict, policy: str) -> list[str]:
    if fixed_size(policy):
        return [FULL_LABEL]
    return [format_budget(b) for b in config["budgets"]]


def trainable_datasets(config: dict) -> list[str]:
    return [n for n, d in config["datasets"].items() if not d["eval_only"]]


def evalsets(config: dict, dataset: str) -> list[str]:
    """Test sets an arm trained on ``dataset`` is evaluated on: its own, then its out-of-distribution sets."""
    return [dataset] + list(config["datasets"][dataset]["ood"])


def leak_tests(config: dict, dataset: str) -> list[str]:
    """The test sets a pool must not share prompts with (prepare's ``--against``): its ``ood`` sets, not its own."""
    ds = config["datasets"][dataset]
    return [] if ds["eval_only"] else [d for d in dict.fromkeys(ds["ood"]) if d != dataset]


def trained_models(config: dict) -> list[str]:
    """The models the grid trains and evaluates (a proxy with ``train: false`` is only scored)."""
    return [m for m, spec in config["models"].items() if spec.get("train", True)]


def arm_source(config: dict, arm: str) -> str:
    """The difficulty source an arm ranks by: its ``@SOURCE``, else ``scoring.difficulty``."""
    return split_arm(arm, config["scoring"]["difficulty"])[1]


def scored_by(config: dict, model: str, arm: str) -> str:
    """The model whose score table an arm of ``model`` selects from: the proxy for a proxy source."""
    return config["scoring"]["proxy"] if SOURCES[arm_source(config, arm)].proxy else model


def scored_models(config: dict) -> list[str]:
    """Every model whose pool scores some arm reads (the trained ones, and the proxy when an arm uses it)."""
    used = {scored_by(config, r["model"], r["policy"]) for r in grid(config)} | set(drift_models(config))
    return [m for m in config["models"] if m in used]


def grid(config: dict) -> list[dict]:
    """Every (model, dataset, policy, budget label, seed) run of the experiment, as wildcard values."""
    return [
        dict(model=m, dataset=d, policy=p, budget=b, seed=s)
        for m in trained_models(config)
        for d in trainable_datasets(config)
        for p in config["policies"]
        for b in budget_labels(config, p)
        for s in config["seeds"]
    ]


def training_runs(config: dict) -> list[dict]:
    """Every trained arm: the grid's runs, times the sweep's variants (with a ``variant`` key) where it sweeps."""
    names = sweep.names(config)
    if not names:
        return grid(config)
    return [dict(r, variant=v) for r in grid(config) for v in names]


def several_budgets(config: dict) -> bool:
    """Several configured budgets that some policy buys (the budget curve's condition)."""
    return len(config["budgets"]) > 1 and not all(fixed_size(p) for p in config["policies"])


def has_ood(config: dict) -> bool:
    return any(config["datasets"][d]["ood"] for d in trainable_datasets(config))


# ---------------------------------------------------------------------------------------------------------------
# The run listing: every file the aggregate stage reads


@dataclass(frozen=True)
class RunFiles:
    model: str
    dataset: str
    policy: str
    budget: str  # the budget label
    seed: int
    subset: str
    log: str
    manifest: str
    evals: dict[str, str]  # evaluation set -> evaluation file
    variant: str = ""  # the sweep variant ("" without a sweep)
    drift: str = ""  # its subset scored again by the trained model ("" without analysis.drift)


@dataclass(frozen=True)
class BaseEval:
    model: str
    evalset: str
    path: str


@dataclass(frozen=True)
class ScoreFile:
    model: str
    dataset: str
    path: str


@dataclass(frozen=True)
class Listing:
    runs: list[RunFiles]
    base: list[BaseEval]
    scores: list[ScoreFile]
    tests: dict[str, str]  # evaluation set -> its test Parquet
    num_generations: int
    prompts_per_step: int
    verify: list[ScoreFile] = field(default_factory=list)  # fresh pass rates of the selected items, where enabled
    variants: dict[str, dict] = field(default_factory=dict)  # sweep variant -> its swept settings' values
    proxy_scores: list[ScoreFile] = field(default_factory=list)  # pool scores of models only scored (proxies)
    model_sizes: dict[str, float] = field(default_factory=dict)  # model -> size_b (billions of parameters; 0: unset)

    def to_json(self) -> str:
        """Without a sweep or a proxy, the listing (and its digest) is what it was before they existed."""
        d = records.left_out(asdict(self), records.LISTING)
        d["runs"] = [records.left_out(r, records.LISTED_RUN) for r in d["runs"]]
        return json.dumps(d, sort_keys=True, indent=1)

    @classmethod
    def from_dict(cls, d: dict) -> "Listing":
        files = {k: [ScoreFile(**s) for s in d.get(k, [])] for k in ("scores", "verify", "proxy_scores")}
        return cls(runs=[RunFiles(**r) for r in d["runs"]], base=[BaseEval(**b) for b in d["base"]], tests=d["tests"],
                   num_generations=d["num_generations"], prompts_per_step=d["prompts_per_step"], **files,
                   variants=d.get("variants", {}), model_sizes=d.get("model_sizes", {}))

    @classmethod
    def read(cls, path: str | Path) -> "Listing":
        """A listing file, its ``{results}/`` paths under the results folder it lies in."""
        root = json.dumps(str(Path(path).resolve().parent.parent))[1:-1]
        return cls.from_dict(json.loads(json.dumps(read_json(path)).replace(RESULTS + "/", root + "/")))

    def base_eval(self, model: str, evalset: str) -> str:
        return next(b.path for b in self.base if (b.model, b.evalset) == (model, evalset))

    def training_value(self, run: RunFiles, key: str):
        """A training setting the analysis needs (``num_generations``, ``prompts_per_step``) as the run's variant
        set it: the swept value, else the base section's."""
        return self.variants.get(run.variant, {}).get(f"training.{key}", getattr(self, key))

    def swept(self) -> list[str]:
        """The swept settings (dotted paths), in sweep order."""
        return list(dict.fromkeys(k for v in self.variants.values() for k in v))


def listing(config: dict) -> Listing:
    """The typed listing of every run of the grid and the files the aggregate stage reads."""
    p = config_paths(config)
    runs = [
        RunFiles(**r, subset=p.subset.format(**r), log=p.train_log.format(**r), manifest=p.manifest.format(**r),
                 evals={e: p.run_eval.format(**r, evalset=e) for e in evalsets(config, r["dataset"])},
                 drift=p.drift.format(**r) if drift_models(config) else "")
        for r in training_runs(config)
    ]
    every_evalset = sorted({e for d in trainable_datasets(config) for e in evalsets(config, d)})
    return Listing(
        runs=runs,
        base=[BaseEval(m, e, p.base_eval.format(model=m, evalset=e)) for m in trained_models(config)
              for e in every_evalset],
        scores=[ScoreFile(m, d, p.scores.format(model=m, dataset=d))
                for m in trained_models(config) for d in trainable_datasets(config)],
        tests={e: p.data.format(dataset=e, split="test") for e in every_evalset},
        num_generations=config["training"]["num_generations"],
        prompts_per_step=config["training"]["prompts_per_step"],
        verify=[ScoreFile(m, d, p.verify.format(model=m, dataset=d))
                for m in trained_models(config) for d in trainable_datasets(config)] if verifies(config) else [],
        variants={v.name: v.values for v in sweep.variants(config)},
        proxy_scores=[ScoreFile(m, d, p.scores.format(model=m, dataset=d)) for m in scored_models(config)
                      if m not in trained_models(config) for d in trainable_datasets(config)],
        model_sizes={m: float(config["models"][m]["size_b"]) for m in scored_models(config) + trained_models(config)},
    )


def verifies(config: dict) -> bool:
    return config["scoring"]["verify_samples"] > 0


def drift_models(config: dict) -> list[str]:
    """The models whose arms are scored again after training (``analysis.drift``; each against its own scores)."""
    return trained_models(config) if config["analysis"].get("drift") else []


def subsets_of(config: dict, model: str, dataset: str) -> list[str]:
    """Every subset selected from one model's scores of one dataset (the items a verification re-samples)."""
    p = paths(config["results"])
    return [p.subset.format(**r) for r in grid(config) if (r["model"], r["dataset"]) == (model, dataset)]


def listing_file(lst: Listing, results: str) -> tuple[str, str]:
    """The listing file's path and text (a run writes it, inside its lock). Paths under the ``results`` folder read
    ``{results}/...`` (a moved folder keeps it); the name is a hash of the text: a changed plan gets a new file, and
    the aggregate jobs that read it re-run."""
    text = relative(lst.to_json(), results) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return paths(results).listing.format(digest=digest), text


# File roles an output reads (grpo_budget.aggregate.outputs.Output.reads).
READS = ("evals", "ood_evals", "tests", "logs", "subsets", "scores", "proxy_scores", "verify", "drift")


def files_read(lst: Listing, reads: frozenset[str]) -> list[str]:
    """The files of the listing in the roles ``reads`` (see :data:`READS`)."""
    unknown = set(reads) - set(READS)
    if unknown:
        raise ValueError(f"unknown file roles {sorted(unknown)}; allowed: {', '.join(READS)}")
    files: list[str] = []
    if "evals" in reads:
        files += [b.path for b in lst.base] + [p for r in lst.runs for p in r.evals.values()]
    if "ood_evals" in reads:
        ood = {(r.model, e) for r in lst.runs for e in r.evals if e != r.dataset}
        files += [b.path for b in lst.base if (b.model, b.evalset) in ood]
        files += [p for r in lst.runs for e, p in r.evals.items() if e != r.dataset]
    if "tests" in reads:
        files += list(lst.tests.values())
    if "logs" in reads:
        files += [r.log for r in lst.runs]
    if "subsets" in reads:
        files += [r.subset for r in lst.runs]
    if "scores" in reads:
        files += [s.path for s in lst.scores]
    if "proxy_scores" in reads:
        files += [s.path for s in lst.proxy_scores]
    if "verify" in reads:
        files += [v.path for v in lst.verify]
    if "drift" in reads:
        files += [r.drift for r in lst.runs if r.drift]
    return list(dict.fromkeys(files))


# ---------------------------------------------------------------------------------------------------------------
# Models and what adaptive scoring settles


def model_path(config: dict, model: str) -> str:
    """Where a model is loaded from: the bootstrapped folder, a fetched hub model in ``model_store``, or its path."""
    spec = config["models"][model]
    if "bootstrap" in spec or "gguf" in spec:  # made by a rule in the results folder
        return paths(config["results"]).model.format(model=model)
    return store_folder(config["model_store"], spec["path"]) if fetched(config, model) else spec["path"]


def adaptive_cuts(config: dict) -> dict | None:
    """What adaptive scoring must settle (``None`` if not adaptive): policies, budgets, rounding, training G."""
    if config["scoring"].get("adaptive") is None:
        return None
    budgets = sorted({parse_budget(b) for p in config["policies"] for b in budget_labels(config, p)}, key=str)
    # Every arm ranks by labels here (config validation refuses adaptive scoring with a label-free arm).
    policies = list(dict.fromkeys(split_arm(p)[0] for p in config["policies"]))
    return {"policies": policies, "budgets": budgets, "rounding": config["budget_rounding"],
            "group_size": config["training"]["num_generations"]}
