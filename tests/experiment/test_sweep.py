"""Sweeps: training settings as a grid axis. Variant names, validation before any job, paths (unchanged without a
sweep), the plan and the tables by variant on synthetic files, the DAG, and (slow) the tiny sweep end to end with
a value added later running only its own jobs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import numpy as np
import pytest
import yaml

from grpo_budget.aggregate import run
from grpo_budget.aggregate.gains import gains_over_seeds
from grpo_budget.aggregate.learnable import learnable_table
from grpo_budget.aggregate.verdicts import verdict_table
from grpo_budget.cluster.jobs import training_job
from grpo_budget.config import schema
from grpo_budget.config.settings import Analysis
from grpo_budget.experiment import config, plan, sweep
from grpo_budget.train.methods import others_settings
from grpo_budget.train.objective import VLLM_FIELDS
from conftest import TINY, inputs_from

ROOT = Path(__file__).resolve().parents[2]
TINY_SWEEP = ROOT / "tests" / "configs" / "tiny-sweep.yaml"
SETTINGS = {"n_boot": 300, "level": 0.95, "seed": 0, "learnable_window": 2, "stratify_by": "auto"}
ANALYSIS = Analysis.from_dict(SETTINGS)  # what the tables take; run.run takes the config's dict, as the CLI does


def raw(path: Path = TINY_SWEEP) -> dict:
    return yaml.safe_load(path.read_text())


def with_sweep(block: dict, **training) -> dict:
    cfg = raw()
    cfg["sweep"] = block
    cfg["training"].update(training)
    return cfg


def job_counts(text: str) -> dict[str, int]:
    text = text[text.index("Job stats:"):]
    counts = {}
    for line in text.splitlines()[3:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


def snakemake(*args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=1800)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
    return out


# ---------------------------------------------------------------------------------------------------------------
# Names and validation


def test_variants_are_every_combination_named_from_their_values():
    cfg = config.validate(with_sweep({"training.num_generations": [4, 8], "training.beta": [0.0, 0.04]}))
    assert sweep.names(cfg) == ["G4-beta0", "G4-beta0.04", "G8-beta0", "G8-beta0.04"]
    v = sweep.variant(cfg, "G8-beta0.04")
    assert v.values == {"training.num_generations": 8, "training.beta": 0.04}
    t = training_job(cfg, "tiny", "G8-beta0.04").settings
    assert (t["num_generations"], t["beta"], t["max_steps"]) == (8, 0.04, 6)  # unswept settings are shared
    base = training_job(cfg, "tiny").settings
    # no variant: the base section, without unused methods' settings, with the job's device and dtype
    unused = others_settings("grpo") | {"method", "rewards"}
    # settings that do nothing here are recorded as runs before them were (config/records.py): dynamic sampling is
    # off (its cap as it was, 4; its filter and what it does at the cap left out), no rollout comes from vLLM
    idle = {"dynamic_at_cap", "dynamic_metric", *VLLM_FIELDS}
    assert base == {**{k: v for k, v in cfg["training"].items() if k not in unused | idle}, "dynamic_max_rounds": 4,
                    "device": "cpu", "dtype": "auto"}
    assert "codapo_repeats" not in base and "method" not in base


def test_lora_values_and_given_names():
    cfg = config.validate(with_sweep({
        "training.lora.target_modules": ["attention", "all-linear", ["q_proj", "v_proj"]],
        "training.lora.layers": [[0, 1], [2, 3]], "training.learning_rate": [1.0e-5],
        "names": {"q_proj.v_proj-layers0-1-lr1e-05": "qv-low"}}))
    assert sweep.names(cfg) == ["attention-layers0-1-lr1e-05", "attention-layers2-3-lr1e-05",
                                "all-linear-layers0-1-lr1e-05", "all-linear-layers2-3-lr1e-05", "qv-low",
                                "q_proj.v_proj-layers2-3-lr1e-05"]
    lora = training_job(cfg, "tiny", "qv-low").settings["lora"]
    assert lora == {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"], "layers": [0, 1]}


@pytest.mark.parametrize("block, extra, message", [
    ({"training.beta": [0.0, -0.04]}, {}, r"^config field 'sweep\.training\.beta\[1\]': -0\.04 is less than the minimum of 0$"),
    ({"training.num_generations": [4, 1]}, {}, r"'sweep\.training\.num_generations\[1\]': 1 is less than the minimum of 2"),
    ({"training.lora.layers": [[0, 3], [1]]}, {}, r"'sweep\.training\.lora\.layers\[1\]'"),
    ({"training.nonsense": [1]}, {}, r"'sweep\.training\.nonsense': 'training\.nonsense' is not a training setting"),
    ({"evaluation.num_samples": [1, 2]}, {}, r"'sweep'"),
    ({"training.beta": [0.0, 0.0]}, {}, r"'sweep\.training\.beta': lists a value twice"),
    ({"training.beta": [0.0], "names": {"beta1": "x"}}, {}, r"'sweep\.names\.beta1': no variant has that derived name"),
    ({"training.beta": [0.0, 0.1], "names": {"beta0": "beta0.1"}}, {}, r"two variants are named 'beta0\.1'"),
    ({"training.prompts_per_step": [8, 6]}, {"gradient_accumulation_steps": 4},
     r"^sweep variant P6 \(training\.prompts_per_step = 6\): .*does not divide"),
    ({"training.prompts_per_step": [8, 64]}, {}, r"sweep variant P64 .*fewer than one training step needs"),
    ({"training.beta": [0.0, 0.1], "only": ["beta0", "beta1"]}, {},
     r"^config field 'sweep\.only\[1\]': no variant is named 'beta1'; allowed: beta0, beta0\.1$"),
])
def test_a_bad_sweep_is_one_line_before_any_job(block, extra, message):
    with pytest.raises(schema.ConfigError, match=message) as err:
        config.validate(with_sweep(block, **extra))
    assert "\n" not in str(err.value)


def test_a_bad_sweep_stops_snakemake_before_any_job(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(with_sweep({"training.beta": [0.0, -1.0]}) | {"results": str(tmp_path / "r")}))
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and "sweep.training.beta[1]" in out.stdout + out.stderr
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------------------------------------------------------
# Paths and the plan


def test_without_a_sweep_paths_and_listing_are_unchanged():
    cfg = config.validate(raw(TINY))
    assert vars(plan.config_paths(cfg)) == vars(plan.paths(cfg["results"]))
    assert plan.config_paths(cfg).train_log.endswith("runs/{model}/{dataset}/{policy}/b{budget}/s{seed}/train_log.parquet")
    assert plan.run_name(cfg) == "{model}_{dataset}_{policy}_b{budget}_s{seed}"
    text = plan.listing(cfg).to_json()
    assert '"variant' not in text  # the same listing file (and digest) as before sweeps existed
    assert plan.training_runs(cfg) == plan.grid(cfg)


def test_a_sweep_multiplies_training_and_shares_selection():
    cfg = config.validate(raw())
    lst = plan.listing(cfg)
    assert len(plan.grid(cfg)) == 2 and len(lst.runs) == 4
    assert len({r.subset for r in lst.runs}) == 2  # one subset per policy, shared by both variants
    assert len({r.log for r in lst.runs}) == 4 and all(f"/v-{r.variant}/" in r.log for r in lst.runs)
    assert all("/v-" not in r.subset for r in lst.runs)
    assert plan.subsets_of(cfg, "tiny", "framearith") == sorted({r.subset for r in lst.runs}, key=[r.subset for r in lst.runs].index)
    back = plan.Listing.from_dict(__import__("json").loads(lst.to_json()))
    assert back == lst and back.swept() == ["training.num_generations"]
    g8 = next(r for r in back.runs if r.variant == "G8")
    assert back.training_value(g8, "num_generations") == 8 and back.training_value(g8, "prompts_per_step") == 8


def test_dry_run_multiplies_only_train_evaluate_and_adds_the_figure():
    out = snakemake("-n", "--configfile", str(TINY_SWEEP), "--config", "results=/tmp/never-written-sweep")
    counts = job_counts(out.stdout + out.stderr)
    assert counts["score"] == 1 and counts["select"] == 2 and counts["verify"] == 1 and counts["evaluate_base"] == 1
    assert counts["train"] == 4 and counts["evaluate"] == 4
    assert counts["figure"] == 7 and counts["table"] == 7 and counts["summary"] == 1  # + gain_vs_setting, variant_verdicts


# ---------------------------------------------------------------------------------------------------------------
# Tables and figures by variant, on synthetic files

IDS = [f"t{i}" for i in range(10)]
BASE = [0, 0, 0, 0, 0, 1, 1, 1, 0, 0]  # 30%


def _eval(correct_by_step: dict[int, list[int]]) -> pd.DataFrame:
    return pd.DataFrame([{"id": i, "step": st, "n_samples": 1, "n_correct": c, "accuracy": float(c)}
                         for st, cs in correct_by_step.items() for i, c in zip(IDS, cs)])


@pytest.fixture()
def swept(tmp_path) -> plan.Listing:
    """Two policies x two variants (G 2 and 8), one seed: hard gains 50 points at G8 and 0 at G2."""
    finals = {("hard", "G2"): BASE, ("hard", "G8"): [1] * 8 + [0, 0], ("random", "G2"): [1] * 5 + [0] * 5,
              ("random", "G8"): [1] * 6 + [0] * 4}
    pd.DataFrame({"id": IDS, "prompt": "q", "answer": "1"}).to_parquet(tmp_path / "test.parquet")
    _eval({0: BASE}).to_parquet(tmp_path / "base.parquet")
    runs = []
    for (policy, variant), final in finals.items():
        d = tmp_path / policy / variant
        d.mkdir(parents=True)
        subset = tmp_path / policy / "subset.parquet"
        pd.DataFrame({"id": ["p0", "p1"], "pass_rate": [0.5, 0.5]}).to_parquet(subset)
        pd.DataFrame({"step": [1, 2, 3], "frac_reward_zero_std": [0.5, 0.5, 0.5]}).to_parquet(d / "log.parquet")
        _eval({3: final}).to_parquet(d / "eval.parquet")
        runs.append(plan.RunFiles("m", "fa", policy, "0.5", 0, str(subset), str(d / "log.parquet"),
                                  str(d / "manifest.json"), {"fa": str(d / "eval.parquet")}, variant))
    return plan.Listing(runs=runs, base=[plan.BaseEval("m", "fa", str(tmp_path / "base.parquet"))], scores=[],
                        tests={"fa": str(tmp_path / "test.parquet")}, num_generations=4, prompts_per_step=4,
                        variants={"G2": {"training.num_generations": 2}, "G8": {"training.num_generations": 8}})


def test_gains_and_verdicts_have_a_variant_column(swept, tmp_path):
    g = gains_over_seeds(swept, ANALYSIS)
    assert list(g[["policy", "variant"]].itertuples(index=False, name=None)) == [
        ("hard", "G2"), ("hard", "G8"), ("random", "G2"), ("random", "G8")]
    assert g["gain_pts"].round(6).tolist() == [0.0, 50.0, 20.0, 30.0]
    v = verdict_table(swept, ANALYSIS)
    assert v["variant"].tolist() == ["G2", "G8"]  # policies compared within each variant
    assert v["diff_pts"].round(6).tolist() == [-20.0, 20.0]
    out = [str(tmp_path / f"v.{x}") for x in ("csv", "md", "html")]
    run.run("verdicts", swept, out, SETTINGS)
    md = (tmp_path / "v.md").read_text()
    assert "budget 0.5 · variant G8" in md and "variant" in pd.read_csv(out[0]).columns
    run.run("summary", swept, [str(tmp_path / "s.csv"), str(tmp_path / "s.md")], SETTINGS)
    assert "| hard | 0.5 | G8 |" in (tmp_path / "s.md").read_text()
    assert "budget 0.5 · G8" in (tmp_path / "s.md").read_text()  # the answer, per variant


def test_learnable_predicts_with_each_variants_group_size(swept):
    t = learnable_table(swept, ANALYSIS)
    assert dict(zip(t["variant"], t["G"])) == {"G2": 2, "G8": 8}
    # p = 0.5 for every item: 1 - 2 * 0.5^G
    pred = dict(zip(t["variant"], t["predicted_plugin_pct"]))
    assert pred["G2"] == pytest.approx(50.0) and pred["G8"] == pytest.approx(100 * (1 - 2 * 0.5 ** 8))


def test_gain_vs_setting_figure(swept, tmp_path):
    outs = [str(tmp_path / "g.png"), str(tmp_path / "g.pdf")]
    run.run("gain_vs_setting", swept, outs, SETTINGS)
    assert Path(outs[0]).read_bytes()[:4] == b"\x89PNG" and Path(outs[1]).read_bytes()[:4] == b"%PDF"


def test_gain_vs_setting_with_two_swept_settings_holds_the_other_fixed(swept, tmp_path):
    """G x beta: a panel per setting and value of the other one (gain against G at each beta, and the reverse)."""
    from dataclasses import replace

    from grpo_budget.aggregate import figures

    variants = {f"G{g}-beta{b}": {"training.num_generations": g, "training.beta": b} for g in (2, 8) for b in (0, 0.04)}
    runs = [replace(r, variant=f"{r.variant}-beta{b}") for r in swept.runs for b in (0, 0.04)]
    two = replace(swept, runs=runs, variants=variants)
    assert two.swept() == ["training.num_generations", "training.beta"]
    panels = []
    real = figures._gain_lines
    figures._gain_lines = lambda ax, g, x_of, xs, s: panels.append((xs, sorted(set(g["variant"])))) or real(ax, g, x_of, xs, s)
    try:
        run.run("gain_vs_setting", two, [str(tmp_path / "g.png")], SETTINGS)
    finally:
        figures._gain_lines = real
    assert panels == [(["2", "8"], ["G2-beta0", "G8-beta0"]), (["2", "8"], ["G2-beta0.04", "G8-beta0.04"]),
                      (["0", "0.04"], ["G2-beta0", "G2-beta0.04"]), (["0", "0.04"], ["G8-beta0", "G8-beta0.04"])]


def test_budget_curve_only_with_several_budgets(swept, tmp_path):
    from grpo_budget.aggregate.run import OUTPUTS

    assert not OUTPUTS["gain_vs_budget"].wanted(config.validate(raw(TINY)))
    assert OUTPUTS["gain_vs_budget"].wanted(config.validate(raw(TINY) | {"budgets": [0.2, 0.5]}))
    assert not OUTPUTS["gain_vs_setting"].wanted(config.validate(raw(TINY)))
    outs = [str(tmp_path / "b.png")]
    run.run("gain_vs_budget", swept, outs, SETTINGS)
    assert Path(outs[0]).read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------------------------------------------------------
# End to end


def test_tiny_sweep_scores_and_selects_once_and_trains_and_evaluates_each_variant(tmp_path):
    out = snakemake("-n", "--configfile", str(TINY_SWEEP), "--config", f"results={tmp_path / 'results'}")
    counts = job_counts(out.stdout + out.stderr)
    assert counts["score"] == 1 and counts["select"] == 2 and counts["verify"] == 1
    assert counts["evaluate_base"] == 1 and counts["train"] == 4 and counts["evaluate"] == 4


@pytest.mark.slow
def test_a_method_sweep_end_to_end_then_a_third_method_runs_only_its_jobs(tiny_run, tmp_path):
    """The tiny sweep's arms swept over training methods (grpo, codapo; then guided added): each variant trains and
    is evaluated, the tables name each arm's method, CoDaPO's extra rollouts count in its cost, and the third
    method adds only its own jobs. (G as an axis: the dry run above and the listing tests; G's learnable shares
    end to end: docs/results.md#the-tiny-sweep.)"""
    # the tiny config's pool, test set, base model, scores, base evaluation and the two arms' subsets: the sweep's
    # are the same (which jobs a fresh sweep plans: the test above); verify checks the sweep's arms only, so it runs
    subsets = tuple(f"runs/tiny/framearith/{p}/b0.2/s0/subset.parquet" for p in ("hard", "random"))
    results = inputs_from(tiny_run, tmp_path / "results", ("data", "models", "scores", "base", *subsets))
    first_cfg = tmp_path / "two.yaml"
    first_cfg.write_text(yaml.safe_dump(with_sweep({"training.method": ["grpo", "codapo"]}, codapo_repeats=1,
                                                   codapo_updates=1)))
    first = snakemake("--configfile", str(first_cfg), "--config", f"results={results}")
    counts = job_counts(first.stdout + first.stderr)
    assert counts["verify"] == 1 and counts["train"] == 4 and counts["evaluate"] == 4
    assert not {"score", "select", "evaluate_base"} & set(counts), counts  # a sweep leaves them as they were
    runs = results / "runs/tiny/framearith"
    for policy in ("hard", "random"):
        assert (runs / policy / "b0.2/s0/subset.parquet").exists()
        for method in ("grpo", "codapo"):
            assert (runs / policy / f"b0.2/s0/v-{method}/eval/framearith.parquet").exists()
    gains = pd.read_csv(results / "tables/gains_over_seeds.csv")
    assert sorted(gains["variant"].unique()) == ["codapo", "grpo"] and len(gains) == 4
    assert "variant" in pd.read_csv(results / "tables/verdicts.csv").columns
    assert (results / "figures/gain_vs_setting.png").read_bytes()[:4] == b"\x89PNG"
    cost = pd.read_csv(results / "tables/cost.csv").set_index(["policy", "variant"])
    for policy in ("hard", "random"):  # CoDaPO's single update: its extra rollouts count in its cost
        assert cost.loc[(policy, "codapo"), "training_tokens"] > cost.loc[(policy, "grpo"), "training_tokens"]
    subset_mtime = (runs / "hard/b0.2/s0/subset.parquet").stat().st_mtime_ns

    more = tmp_path / "three.yaml"
    more.write_text(yaml.safe_dump(with_sweep({"training.method": ["grpo", "codapo", "guided"]}, codapo_repeats=1,
                                           codapo_updates=1)))
    second = snakemake("--configfile", str(more), "--config", f"results={results}")
    counts = job_counts(second.stdout + second.stderr)
    assert counts["train"] == 2 and counts["evaluate"] == 2  # only guided's arms
    for rule in ("score", "select", "verify", "evaluate_base", "bootstrap_model", "prepare"):
        assert rule not in counts, (rule, counts)
    assert set(counts) - {"train", "evaluate", "summary", "table", "figure", "all", "total"} == set()
    assert (runs / "hard/b0.2/s0/subset.parquet").stat().st_mtime_ns == subset_mtime
    summary = (results / "summary.md").read_text()
    matched = (results / "tables/matched_compute.md").read_text()
    versus = pd.read_csv(results / "tables/variant_verdicts.csv")
    for method in ("grpo", "codapo", "guided"):
        assert f"| {method} |" in summary and f"· {method} |" in matched
    assert len(versus) == 6 and set(versus["variant_a"]) | set(versus["variant_b"]) == {"grpo", "codapo", "guided"}
    guided = pd.read_parquet(runs / "hard/b0.2/s0/v-guided/train_log.parquet")
    assert guided["guided/groups"].dropna().sum() > 0  # a hard subset has groups that all fail


@pytest.mark.parametrize("name, expected", [
    ("sweep-group-kl", {"prepare": 2, "score": 1, "select": 9, "train": 54, "evaluate_base": 1, "evaluate": 54,
                        "summary": 1, "table": 7, "figure": 8}),  # + variant_verdicts, gain_vs_setting, gain_vs_budget
    ("sweep-lora-targets", {"prepare": 2, "score": 1, "select": 4, "train": 48, "evaluate_base": 1, "evaluate": 48,
                            "summary": 1, "table": 7, "figure": 7}),
])
def test_sweep_configs_build_their_dag_through_the_slurm_profile(name, expected):
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_SLURM_")}
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--profile", "profiles/slurm", "--configfile",
                          f"configs/{name}.yaml"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    counts = job_counts(out.stdout + out.stderr)
    assert {k: counts.get(k, 0) for k in expected} == expected


def test_variants_of_an_arm_are_compared_at_equal_steps_and_at_their_matched_tokens(swept, tmp_path):
    """G8 generates 4x G2's tokens per step: at equal steps hard G2 − G8 is −50 points; at G2's final tokens (300),
    G8 is a quarter of the way from the base (step 0, 0 tokens) to its first and only checkpoint (step 3, 1200)."""
    from grpo_budget.aggregate.variants import variant_verdicts

    for r in swept.runs:
        per_step = 100 if r.variant == "G2" else 400
        log = pd.read_parquet(r.log).assign(**{"rollouts/generated": 8, "rollouts/discarded": 0,
                                               "rollouts/generated_tokens": per_step})
        log.to_parquet(r.log)
    t = variant_verdicts(swept, ANALYSIS).set_index("policy")
    hard = t.loc["hard"]
    assert (hard["variant_a"], hard["variant_b"], hard["tokens"]) == ("G2", "G8", 300.0)
    assert hard["diff_pts"] == pytest.approx(-50.0) and hard["verdict"] in ("G8 better", "not distinguishable")
    base, g8 = np.array(BASE, float), np.array([1] * 8 + [0, 0], float)
    assert hard["tok_acc_b"] == pytest.approx((base + (g8 - base) * 0.25).mean())
    assert hard["tok_acc_a"] == pytest.approx(base.mean())
    assert t.loc["random", "diff_pts"] == pytest.approx(-10.0)
    out = [str(tmp_path / f"vv.{x}") for x in ("csv", "md", "html")]
    run.run("variant_verdicts", swept, out, SETTINGS)
    assert "hard @ 0.5" in (tmp_path / "vv.md").read_text()


def test_only_keeps_the_named_variants_of_the_combinations():
    cfg = config.validate(with_sweep({"training.method": ["grpo", "codapo", "guided"],
                                      "training.dynamic_sampling": [False, True],
                                      "names": {"grpo-dynamic-off": "grpo", "grpo-dynamic-on": "grpo-dynamic"},
                                      "only": ["grpo", "codapo-dynamic-off", "grpo-dynamic"]}))
    assert sweep.names(cfg) == ["grpo", "grpo-dynamic", "codapo-dynamic-off"]
    assert training_job(cfg, "tiny", "grpo-dynamic").settings["dynamic_sampling"] is True
    assert training_job(cfg, "tiny", "codapo-dynamic-off").settings["method"] == "codapo"
