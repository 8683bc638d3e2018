"""The memory plan: shapes and parameter counts of the paper models, and what fits on which card."""

import json
import re

import pytest

from grpo_budget.cluster import jobs, shapes
from grpo_budget.cluster.shapes import BUNDLED, Shape
from grpo_budget.errors import UserError
from grpo_budget.hub import folder_name

# Published totals (model cards: Qwen3 "Number of Parameters: 4.0B / 14.8B", Qwen2.5 "0.49B / 1.54B / 3.09B",
# Llama 3.1 "8B" = 8.03B on its card, phi-4 "14B" = 14.7B in its technical report).
PUBLISHED_B = {"Qwen--Qwen3-4B": 4.0, "Qwen--Qwen3-14B": 14.8, "microsoft--phi-4": 14.7,
               "meta-llama--Llama-3.1-8B-Instruct": 8.03, "Qwen--Qwen2.5-0.5B-Instruct": 0.49,
               "Qwen--Qwen2.5-1.5B-Instruct": 1.54, "Qwen--Qwen2.5-3B-Instruct": 3.09}


def meta_model(config: dict):
    """The model transformers builds from ``config``, on the meta device (no memory for its weights)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    c = dict(config)
    cfg = AutoConfig.for_model(c.pop("model_type"), **{k: v for k, v in c.items() if k != "architectures"})
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(cfg)


@pytest.mark.parametrize("name", sorted(PUBLISHED_B))
def test_parameter_count_matches_a_model_built_from_the_same_config(name):
    config = json.loads((BUNDLED / f"{name}.json").read_text())
    model = meta_model(config)
    shape = Shape.from_config(config)
    assert shape.parameters() == sum(p.numel() for p in model.parameters())
    assert shape.parameters() / 1e9 == pytest.approx(PUBLISHED_B[name], rel=0.01)
    linears = {n.rsplit(".", 1)[-1]: (m.in_features, m.out_features) for n, m in model.named_modules()
               if n.startswith("model.layers.0.") and hasattr(m, "in_features")}
    if "qkv_proj" in linears:  # Phi-3: fused; LoRA's parameter count on the parts is at least the fused one's
        fused = sum(a + b for a, b in linears.values())
        assert shape.lora_parameters(1, "all-linear", layers=1) >= fused
    else:
        assert linears == shape.linears()


def test_every_paper_model_has_its_config_bundled():
    from grpo_budget.experiment.config import load

    for cfg in ("hard-examples", "difficulty-limits", "sweep-group-kl", "sweep-lora-targets"):
        for spec in load(f"configs/{cfg}.yaml")["models"].values():
            assert shapes.find_config(spec["path"], None) == BUNDLED / f"{folder_name(spec['path'])}.json"


def test_a_local_folder_wins_over_the_bundled_copy(tmp_path):
    config = json.loads((BUNDLED / "Qwen--Qwen3-4B.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(config, num_hidden_layers=2)))
    assert shapes.load_shape(str(tmp_path)).layers == 2
    store = tmp_path / "store"
    (store / "Qwen--Qwen3-4B").mkdir(parents=True)
    (store / "Qwen--Qwen3-4B" / "config.json").write_text(json.dumps(dict(config, num_hidden_layers=3)))
    assert shapes.load_shape("Qwen/Qwen3-4B", str(store)).layers == 3
    assert shapes.load_shape("Qwen/Qwen3-4B").layers == 36
    assert shapes.load_shape("nobody/unknown-model") is None


def test_lora_parameters_by_group():
    s = Shape.from_config(json.loads((BUNDLED / "meta-llama--Llama-3.1-8B-Instruct.json").read_text()))
    attention = 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2) * 32
    assert s.lora_parameters(16, "attention") == attention
    assert s.lora_parameters(16, ["q_proj"]) == 16 * 8192 * 32
    assert s.lora_parameters(16, "all-linear") == attention + 16 * (4096 + 14336) * 3 * 32
    assert s.kv_bytes_per_token(2) == 2 * 32 * 1024 * 2  # 128 KiB per token in bf16


def paper_config(**changes):
    from grpo_budget.experiment.config import load

    cfg = load("configs/hard-examples.yaml")
    for section, values in changes.items():
        cfg[section] = dict(cfg[section], **values) if isinstance(values, dict) else values
    return cfg


def by_rule(budgets, model, rule):
    return next(b for b in budgets if (b.model, b.rule) == (model, rule))


def test_colocated_vllm_at_0_3_of_80gb_cannot_hold_a_14b_copy():
    """Item 1 of the issue: 0.3 x 80 GiB = 24 GiB < Qwen3-14B's 27.5 GiB of bf16 weights."""
    from grpo_budget.cluster import memory, memory_plan

    b = by_rule(memory_plan.budgets(paper_config(training={"vllm_gpu_memory_utilization": 0.3})), "qwen3-14b", "train")
    assert not b.fits and "vLLM would not start" in b.problem
    assert b.parts["vLLM weights"] / memory.GIB == pytest.approx(27.5, abs=0.1)
    with pytest.raises(UserError, match="model qwen3-14b, rule train: .*raise training.vllm_gpu_memory_utilization"):
        memory.check(memory_plan.budgets(paper_config(training={"vllm_gpu_memory_utilization": 0.3})))


def test_auto_settings_fit_every_paper_job_on_80gb_and_give_vllm_a_bounded_context():
    """Item 2: vLLM's context is prompt + completion (Llama-3.1's own 131,072 would need 16 GiB of KV cache)."""
    from grpo_budget.cluster import memory, memory_plan

    cfg = paper_config()
    budgets = memory_plan.check_config(cfg)
    assert len(budgets) == 16 and all(b.fits for b in budgets)
    llama = by_rule(budgets, "llama-3.1-8b", "train")
    assert llama.settings["vllm_max_model_length"] == 1024 + 250
    assert 131072 * Shape.from_config(json.loads((BUNDLED / "meta-llama--Llama-3.1-8B-Instruct.json").read_text())
                                      ).kv_bytes_per_token(2) == 16 * memory.GIB
    big = by_rule(budgets, "qwen3-14b", "train")
    assert big.settings["gradient_checkpointing"] is True  # 150 GiB more activations without it
    # without checkpointing one micro-batch of Qwen3-4B took 89.7 GiB on an H200 (../shared/gpu): not on 80 GiB
    small = by_rule(budgets, "qwen3-4b", "train")
    assert small.settings["gradient_checkpointing"] is True and "checkpointing off would need" in small.note
    s = jobs.training_job(cfg, "qwen3-14b").settings
    assert s["vllm_gpu_memory_utilization"] == big.settings["vllm_gpu_memory_utilization"] and s["device"] == "cuda"


def test_drift_jobs_are_sized_like_scoring_with_the_arms_adapter():
    """analysis.drift: one more GPU rule per trained model, the scoring's generation with a LoRA slot, checked."""
    from grpo_budget.cluster import memory_plan

    budgets = memory_plan.check_config(paper_config(analysis={"drift": True}))
    assert len(budgets) == 16 + 4 and all(b.fits for b in budgets)
    for model in ("qwen3-4b", "qwen3-14b", "phi-4", "llama-3.1-8b"):
        drift, score = by_rule(budgets, model, "drift"), by_rule(budgets, model, "score")
        assert drift.settings == score.settings and "vLLM LoRA slot" in drift.parts and "vLLM LoRA slot" not in score.parts


def test_too_large_micro_batches_are_refused_with_what_to_change():
    from grpo_budget.cluster import memory_plan

    cfg = paper_config(training={"prompts_per_step": 16})  # 128 completions in one micro-batch
    with pytest.raises(UserError, match=r"the smallest change that fits: training.gradient_accumulation_steps: (\d+)"
                       ) as refused:
        memory_plan.check_config(cfg)
    # the value named fits at once (issue 55: 774 GiB, then 146, then a fit took one edit per message)
    assert "model qwen3-4b, rule train" in str(refused.value)
    steps = int(re.search(r"gradient_accumulation_steps: (\d+)", str(refused.value)).group(1))

    def train_job(k: int):
        budgets = memory_plan.budgets(paper_config(training={"prompts_per_step": 16, "gradient_accumulation_steps": k}))
        return by_rule(budgets, "qwen3-4b", "train")

    assert train_job(steps).fits
    assert not train_job(max(k for k in range(1, steps) if 16 % k == 0)).fits  # the smallest that fits
    # where no micro-batch fits (Qwen3-14B beside its colocated vLLM engine), it says what else would
    with pytest.raises(UserError, match=r"qwen3-14b, rule train: .*no micro-batch or checkpointing setting fits.*"
                                        r"training.max_completion_length"):
        memory_plan.check_config(paper_config(training={"prompts_per_step": 16, "gradient_accumulation_steps": 4}))


def test_on_cpu_training_jobs_are_sized_against_this_machines_memory(monkeypatch):
    """The SmolLM2 defect of issue 26: two train jobs with 32 completions per micro-batch were OOM-killed at 20 and
    24 GB on a 24 GB machine, and nothing refused them, because the plan checked only device cuda."""
    from grpo_budget.cluster import memory, memory_plan

    monkeypatch.setattr(jobs, "host_memory_gib", lambda: 24.0)

    def small(**changes):
        cfg = paper_config(device="cpu", gpu={"max_prompt_tokens": 256}, **changes)
        spec = dict(cfg["models"]["qwen3-4b"], path="Qwen/Qwen2.5-0.5B-Instruct", size_b=0.5, dtype="float32")
        cfg["models"] = {"qwen2.5-0.5b": spec}
        return cfg

    cfg = small()
    (b,) = memory_plan.check_config(cfg)  # 1 prompt x 8 completions of up to 256 + 250 tokens
    shape = jobs.model_shape(cfg, "qwen2.5-0.5b")
    assert b.card == 24 * memory.GIB and b.device == "cpu" and "CUDA context" not in b.parts
    assert b.parts["weights"] == shape.parameters() * 4 and b.parts["process"] == memory.PROCESS
    assert b.fits and b.settings == {"gradient_checkpointing": False}
    assert jobs.training_job(cfg, "qwen2.5-0.5b").settings["gradient_checkpointing"] is False
    # 64 completions in one micro-batch do not fit without checkpointing: auto turns it on
    wide = small(training={"prompts_per_step": 8, "gradient_checkpointing": "auto"})
    assert jobs.training_job(wide, "qwen2.5-0.5b").settings["gradient_checkpointing"] is True
    wide["training"]["gradient_checkpointing"] = False
    with pytest.raises(UserError, match=r"rule train: needs .* GiB of memory \(.*\) on this machine's 24 GiB "
                                        r"\(device cpu\).*the smallest change that fits: training.gradient_"):
        memory_plan.check_config(wide)
    # a 14B model's bf16 weights alone are 27.5 GiB
    with pytest.raises(UserError, match="model qwen3-14b, rule train: .*on this machine's 24 GiB"):
        memory_plan.check_config(paper_config(device="cpu"))


def test_unknown_models_are_refused_on_cuda_and_left_to_their_job_on_cpu():
    from grpo_budget.cluster import memory_plan

    on_cpu = paper_config(device="cpu")
    on_cpu["models"] = {"mystery": dict(on_cpu["models"]["qwen3-4b"], path="nobody/mystery-7b")}
    assert memory_plan.check_config(on_cpu) == []
    cfg = paper_config(models={"mystery": {"path": "nobody/mystery-7b", "dtype": "auto", "size_b": 7, "train": True}})
    with pytest.raises(UserError, match="models mystery: no config.json.*grpo-budget fetch-models"):
        memory_plan.check_config(cfg)


def test_the_gpu_memory_check_runs_shrunk_on_the_cpu_from_a_bare_checkout():
    """perf/memory_check.py (perf/gpu-check.sh's first step) on a node with only torch, transformers and peft: the
    memory-plan modules it imports pull in no registry, schema or data library."""
    import subprocess
    import sys

    from conftest import ROOT

    probe = ("import sys; import grpo_budget.cluster.memory, grpo_budget.hardware; "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'pyarrow', 'scipy', 'jsonschema', "
             "'yaml', 'datasets', 'trl'}))")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT).stdout.strip() == "[]"
    out = subprocess.run([sys.executable, "perf/memory_check.py", "--device", "cpu", "--dtype", "float32", "--layers",
                          "1", "--hidden", "64", "--models", "Qwen--Qwen3-4B", "--micro-batch", "2", "--prompt", "16",
                          "--completion", "8", "--lora-r", "4"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [r["checkpointing"] for r in rows] == [True, False]
    assert all(r["measured"]["step_s"] > 0 and r["predicted"]["memory_gib"] > 0 for r in rows)


def test_a_transformers_generation_batch_is_sized_to_the_card():
    """The H200 score job generated 512 sequences in one batch; on a smaller card the plan lowers the batch to what
    the KV cache leaves room for (a tenth of the card spare), and leaves a batch that fits as it is."""
    from grpo_budget.cluster import memory, memory_plan

    def scoring(card_gib, batch):
        cfg = paper_config(gpu={"memory_gib": card_gib}, scoring={"batch_size": batch}, backend="transformers")
        cfg["models"] = {"qwen3-4b": cfg["models"]["qwen3-4b"]}
        settings = jobs.generation_job(cfg, "score", "qwen3-4b").settings
        return settings["batch_size"], by_rule(memory_plan.check_config(cfg), "qwen3-4b", "score")

    shape = Shape.from_config(json.loads((BUNDLED / "Qwen--Qwen3-4B.json").read_text()))
    per_sequence = shape.kv_bytes_per_token(2) * (1024 + 250) + shape.vocab * 4
    batch, budget = scoring(40, 512)
    assert batch == int((0.9 * 40 * memory.GIB - shape.parameters() * 2 - memory.CONTEXT) // per_sequence) == 156
    assert budget.settings["batch_size"] == batch and "lowered to 156" in budget.note
    assert budget.total <= 0.9 * budget.card < (budget.total + per_sequence)
    assert scoring(80, 64)[0] == 64


def test_the_plan_sizes_each_job_with_the_settings_its_builder_gives_the_job():
    """One builder per kind of job: the memory plan's budget is the one the job's settings were resolved from, for
    every GPU rule (verification included: its settings once failed to build on cuda, a KeyError on 'verify')."""
    from grpo_budget.cluster import memory_plan

    cfg = paper_config(scoring={"verify_samples": 4}, backend="transformers")
    cfg["models"] = {"qwen3-4b": cfg["models"]["qwen3-4b"]}
    budgets = memory_plan.check_config(cfg)
    assert [b.rule for b in budgets] == ["score", "verify", "train", "evaluate_base", "evaluate"]
    train = jobs.training_job(cfg, "qwen3-4b")
    assert by_rule(budgets, "qwen3-4b", "train").settings.items() <= train.settings.items()
    for b in budgets[:2]:
        assert jobs.generation_job(cfg, b.rule, "qwen3-4b").settings["batch_size"] == b.settings["batch_size"]


def test_a_methods_extra_rollouts_enlarge_the_micro_batch_the_plan_sizes():
    """CoDaPO's single update's resampled groups join the step's batch, so each micro-batch holds more completions
    than TRL's per-device batch: the plan sizes the activations of the micro-batch the method makes; its two
    updates are steps of the batch's size."""
    grpo = jobs.training_job(paper_config(training={"gradient_checkpointing": True}), "qwen3-4b").budget
    cfg = paper_config(training={"gradient_checkpointing": True, "method": "codapo", "codapo_repeats": 1,
                                 "codapo_resample_share": 1.0, "codapo_updates": 1})
    codapo = jobs.training_job(cfg, "qwen3-4b").budget  # 1 prompt x 8 completions, + 1 x 1 x 8 resampled
    assert codapo.parts["activations"] == pytest.approx(2 * grpo.parts["activations"], rel=0.05)
    cfg["training"]["codapo_updates"] = 2
    assert jobs.training_job(cfg, "qwen3-4b").budget.parts["activations"] == grpo.parts["activations"]
