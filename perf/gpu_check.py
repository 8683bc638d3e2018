"""The pieces of perf/gpu-check.sh: a model in a real shape with a real tokenizer and random weights (no download), the
workflow config of the check, and the table of measured against planned memory and time per rule.

    python perf/gpu_check.py model TOKENIZER_DIR OUT [--device cpu]       # SmolLM2-1.7B's shape; cpu: shrunk
    python perf/gpu_check.py config MODEL BBH_JSON RESULTS [--device cpu] # the check's config (YAML on stdout)
    python perf/gpu_check.py table CONFIG PEAKS_JSONL                     # measured vs planned, Markdown

Each process's peak CUDA memory comes from perf/gpu_check_site/sitecustomize.py (on PYTHONPATH, GPUCHECK_PEAKS set).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")
# SmolLM2-1.7B-Instruct's shape (its config.json on the hub): SmolLM2-135M's tokenizer family, 1.71 B parameters
SHAPE = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=32,
             num_key_value_heads=32, head_dim=64, rope_parameters={"rope_theta": 130000.0, "rope_type": "default"})
SHRUNK = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2)


def make_model(tokenizer: Path, out: Path, device: str) -> dict:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    c = json.loads((tokenizer / "config.json").read_text())
    c.update(SHAPE, dtype="bfloat16")
    if device == "cpu":
        c.update(SHRUNK, head_dim=64)
    c.pop("_model_name_or_path", None)
    cfg = AutoConfig.for_model(c.pop("model_type"), **{k: v for k, v in c.items() if k != "architectures"})
    cfg.architectures = ["LlamaForCausalLM"]
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for f in TOKENIZER_FILES:
        if (tokenizer / f).exists():
            shutil.copy(tokenizer / f, out / f)
    return {"model": str(out), "parameters": sum(p.numel() for p in model.parameters())}


def config(model: str, data: str, results: str, device: str) -> dict:
    """Every GPU rule on real BBH items: two policies, dynamic sampling off and on; shrunk on the CPU."""
    cpu = device == "cpu"
    return {
        "results": results, "device": device,
        "models": {"check": {"path": model, "size_b": 1.7}},
        "gpu": {"memory_gib": 139, "max_prompt_tokens": 320},
        "datasets": {"bbh3": {"source": "benchmark", "benchmark": "bbh_shuffled_objects",
                              "spec": {"data_files": data, "field": "examples", "objects": [3],
                                       "pool_size": 8 if cpu else 64, "test_size": 8 if cpu else 64},
                              "grading": {"mode": "lenient"}}},
        "policies": ["hard", "random"], "budgets": [0.25], "seeds": [0], "backend": "transformers",
        "scoring": {"num_samples": 2 if cpu else 8, "temperature": 1.0, "max_new_tokens": 8 if cpu else 160,
                    "batch_size": 512, "verify_samples": 0},
        "training": {"num_generations": 2 if cpu else 8, "prompts_per_step": 2, "max_steps": 2 if cpu else 6,
                     "save_steps": 1 if cpu else 3, "max_completion_length": 8 if cpu else 160,
                     "learning_rate": 1.0e-5, "beta": 0.0, "temperature": 1.0, "dynamic_max_rounds": 2,
                     "lora": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear"}},
        "sweep": {"training.dynamic_sampling": [False, True]},
        "evaluation": {"num_samples": 1, "temperature": 0.0, "max_new_tokens": 8 if cpu else 160,
                       "batch_size": 128, "seed": 1234},
        "analysis": {"n_boot": 200},
    }


def rule_of(argv: str) -> str | None:
    """The workflow rule a recorded process ran, from its command line: the GPU rule whose subcommand it ran (of
    the two that run ``evaluate``, the one that evaluates a manifest's checkpoints when it names one)."""
    from grpo_budget.experiment.rules import RULES

    words = argv.split()
    for w in words:
        rules = [r for r, spec in RULES.items() if spec.gpu and spec.command == w]
        if len(rules) > 1:  # evaluate_base, then evaluate, which is given the arm's manifest
            return rules[-1] if "--manifest" in words else rules[0]
        if rules:
            return rules[0]
    return None


def table(config_path: str, peaks_path: str) -> str:
    """Per GPU rule: the memory plan's GiB beside the measured peak (allocated, reserved), and the cost plan's job
    time beside the measured one (benchmark files)."""
    import pandas as pd

    from grpo_budget.cluster import memory, memory_plan
    from grpo_budget.experiment.rules import RULES, log_folder
    from grpo_budget.experiment import plan
    from grpo_budget.experiment.config import load

    cfg = load(config_path)
    planned = {b.rule: b.total / memory.GIB for b in memory_plan.budgets(cfg)}
    peaks = pd.DataFrame([json.loads(x) for x in Path(peaks_path).read_text().splitlines() if x.strip()]
                         if Path(peaks_path).exists() else [], columns=["argv", "wall_s", "peak_allocated_gib",
                                                                        "peak_reserved_gib"])
    peaks["rule"] = peaks["argv"].map(rule_of)
    results = Path(cfg["results"])
    cost = pd.read_csv(results / "plan" / "cost.csv") if (results / "plan" / "cost.csv").exists() else None
    rows = ["| rule | jobs | planned GiB | peak allocated GiB | peak reserved GiB | planned s (median) | measured s "
            "(median) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for rule in (r for r, spec in RULES.items() if spec.gpu):
        mine = peaks[peaks["rule"] == rule]
        folder = results / Path(plan.PATTERNS["benchmark"].format(rule=log_folder(rule), name="x")).parent
        bench = sorted(folder.glob("*.tsv"))
        seconds = [float(pd.read_csv(f, sep="\t")["s"].iloc[-1]) for f in bench]
        plan_s = cost[cost["rule"] == rule]["seconds"].median() if cost is not None else float("nan")
        if rule not in planned and not seconds:
            continue  # not in this config

        def span(col: str) -> str:
            return f"{mine[col].min():.1f}-{mine[col].max():.1f}" if len(mine) else "-"

        gib = f"{planned[rule]:.1f}" if rule in planned else "-"  # device cpu sizes only the training jobs
        rows.append(f"| {rule} | {max(len(mine), len(seconds))} | {gib} | {span('peak_allocated_gib')} | "
                    f"{span('peak_reserved_gib')} | {plan_s:.0f} | "
                    f"{pd.Series(seconds).median() if seconds else float('nan'):.0f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("model")
    m.add_argument("tokenizer", type=Path)
    m.add_argument("out", type=Path)
    m.add_argument("--device", default="cuda")
    c = sub.add_parser("config")
    c.add_argument("model")
    c.add_argument("data")
    c.add_argument("results")
    c.add_argument("--device", default="cuda")
    t = sub.add_parser("table")
    t.add_argument("config")
    t.add_argument("peaks")
    a = p.parse_args(argv)
    if a.command == "model":
        print(json.dumps(make_model(a.tokenizer, a.out, a.device)))
    elif a.command == "config":
        import yaml

        yaml.safe_dump(config(a.model, a.data, a.results, a.device), sys.stdout, sort_keys=False)
    else:
        print(table(a.config, a.peaks))


if __name__ == "__main__":
    main()
