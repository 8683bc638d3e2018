"""The activation terms of the memory plan against what autograd really keeps (counted on the CPU with the real
transformers + PEFT modules) and against the peaks measured on an H200 (../shared/gpu/memory-check-h200.csv)."""

import csv
import json
import os

import pytest

from grpo_budget.cluster import memory
from grpo_budget.cluster.activations import layer_bytes, training_step
from grpo_budget.cluster.shapes import BUNDLED, Shape

from conftest import ROOT

MEASURED = ROOT.parent / "shared" / "gpu" / "memory-check-h200.csv"
H200_GIB = 139.8  # the card the CSV was measured on (torch.cuda.get_device_properties total_memory)
NARROW = dict(hidden_size=64, intermediate_size=160, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
              vocab_size=256, pad_token_id=0, bos_token_id=0, eos_token_id=0)


def saved_bytes(config: dict, layers: int, tokens: int, padded: bool, dtype: str = "bfloat16") -> int:
    """Bytes autograd keeps for backward over one sequence (parameters aside), counted by storage."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    c = {k: v for k, v in config.items() if k != "architectures"}
    cfg = AutoConfig.for_model(c.pop("model_type"), **dict(c, num_hidden_layers=layers))
    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype)),
                           LoraConfig(r=4, lora_alpha=4, target_modules="all-linear"))
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            kept[s.data_ptr()] = s.nbytes()
        return t

    ids = torch.randint(1, cfg.vocab_size, (1, tokens))
    mask = torch.ones_like(ids)
    if padded:
        mask[0, 0] = 0
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, attention_mask=mask, logits_to_keep=1)
    return sum(kept.values())


@pytest.mark.parametrize("name", ["Qwen--Qwen3-4B", "meta-llama--Llama-3.1-8B-Instruct", "microsoft--phi-4"])
@pytest.mark.parametrize("padded", [False, True])
def test_one_layer_keeps_what_the_plan_counts(name, padded):
    """A decoder layer's kept bytes per token (two layers less one, real module code at narrow widths) equal the
    plan's terms exactly: the float32 norm inputs, PEFT's float32 input casts, attention and MLP tensors."""
    config = dict(json.loads((BUNDLED / f"{name}.json").read_text()), **NARROW)
    tokens = 32
    per_token = (saved_bytes(config, 2, tokens, padded) - saved_bytes(config, 1, tokens, padded)) / tokens
    assert per_token == layer_bytes(Shape.from_config(config), 2, 4, "all-linear", padded, tokens)


@pytest.mark.parametrize("name", ["Qwen--Qwen3-4B", "meta-llama--Llama-3.1-8B-Instruct", "microsoft--phi-4"])
def test_a_float32_layer_is_never_counted_low(name):
    """Float32 models (device cpu) skip PEFT's cast: each input tensor is kept once; the plan counts the o
    projection's input too, which some layers share with attention's output."""
    config = dict(json.loads((BUNDLED / f"{name}.json").read_text()), **NARROW)
    tokens = 32
    per_token = (saved_bytes(config, 2, tokens, True, "float32") - saved_bytes(config, 1, tokens, True, "float32")) \
        / tokens
    planned = layer_bytes(Shape.from_config(config), 4, 4, "all-linear", True, tokens)
    assert per_token <= planned <= 1.06 * per_token


def measured_rows():
    if not MEASURED.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{MEASURED} is missing (CI=true: the GPU measurements must be there)")
        pytest.skip(f"the GPU measurements are not at {MEASURED}")
    return list(csv.DictReader(MEASURED.open()))


def predicted_gib(row: dict) -> float:
    shape = Shape.from_config(json.loads((BUNDLED / f"{row['model']}.json").read_text()))
    completion = int(row["completion_tokens"])
    parts = training_step(shape, int(row["micro_batch"]), int(row["prompt_tokens"]) + completion, completion, 2,
                          row["gradient_checkpointing"] == "True", int(row["lora_r"]), row["lora_targets"],
                          masked=False)
    return sum(parts.values()) / memory.GIB


def test_every_measured_training_step_is_predicted_within_10_percent_and_never_5_percent_low():
    rows = [r for r in measured_rows() if r["measured_peak_allocated_gib"]]
    assert len(rows) == 17
    errors = {(r["model"], r["micro_batch"], r["gradient_checkpointing"]):
              predicted_gib(r) / float(r["measured_peak_allocated_gib"]) - 1 for r in rows}
    assert all(-0.05 <= e <= 0.10 for e in errors.values()), errors


def test_the_step_that_ran_out_of_memory_on_the_h200_is_refused_for_that_card():
    (oom,) = [r for r in measured_rows() if not r["measured_peak_allocated_gib"]]
    assert "out of memory" in oom["note"]
    assert predicted_gib(oom) > H200_GIB


def test_the_cost_plan_charges_checkpointings_recomputation_within_15_percent_of_the_measured_ratio():
    from grpo_budget.hardware import DEFAULTS

    rows = {(r["model"], r["micro_batch"], r["gradient_checkpointing"]): r for r in measured_rows()
            if r["measured_step_s"]}
    pairs = [(k[:2], float(r["measured_step_s"]) / float(rows[(*k[:2], "False")]["measured_step_s"]))
             for k, r in rows.items() if k[2] == "True" and (*k[:2], "False") in rows]
    assert len(pairs) == 8
    for (model, _), measured in pairs:
        size = Shape.from_config(json.loads((BUNDLED / f"{model}.json").read_text())).parameters() / 1e9
        planned = DEFAULTS.train_rate(size) / DEFAULTS.train_rate(size, checkpointing=True)
        assert planned == pytest.approx(measured, rel=0.15), (model, measured)


def test_train_jobs_carry_the_memory_plans_checkpointing_into_their_cost():
    from dataclasses import replace

    from grpo_budget.cluster import rates, work
    from grpo_budget.experiment.config import load

    trains = [j for j in work.jobs(load("configs/hard-examples.yaml")) if j.rule == "train"]
    assert trains and all(j.checkpointing for j in trains)  # auto: every paper model checkpoints on 80 GiB
    on, off = rates.default_rate(trains[0]), rates.default_rate(replace(trains[0], checkpointing=False))
    assert on.per_token == pytest.approx(1.5 * off.per_token)
