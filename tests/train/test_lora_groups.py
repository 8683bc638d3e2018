"""LoRA targets by named group (attention, mlp, all-linear) and by a range of decoder layers, resolved to PEFT's
target_modules and layers_to_transform on tiny Llama, Qwen2 and Phi-3 models built here (nothing from the hub)."""

from __future__ import annotations

import copy

import pytest

from grpo_budget.errors import UserError
from grpo_budget.config import schema
from grpo_budget.config.settings import Training
from grpo_budget.train import training
from grpo_budget.train.fingerprint import trajectory_settings
from grpo_budget.train.lora import check_lora_targets, lora_config, resolve_lora_targets

TINY = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=4, num_attention_heads=2,
            num_key_value_heads=2, max_position_embeddings=64, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def _model(kind: str):
    import transformers

    cfg, cls = {"llama": ("LlamaConfig", "LlamaForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
                "phi3": ("Phi3Config", "Phi3ForCausalLM")}[kind]
    return getattr(transformers, cls)(getattr(transformers, cfg)(**TINY))


@pytest.fixture(scope="module", params=["llama", "qwen2", "phi3"])
def model(request):
    return request.param, _model(request.param)


ATTENTION = {"llama": {"q_proj", "k_proj", "v_proj", "o_proj"}, "qwen2": {"q_proj", "k_proj", "v_proj", "o_proj"},
             "phi3": {"qkv_proj", "o_proj"}}
MLP = {"llama": {"gate_proj", "up_proj", "down_proj"}, "qwen2": {"gate_proj", "up_proj", "down_proj"},
       "phi3": {"gate_up_proj", "down_proj"}}


def _adapted(model, settings: dict) -> set[tuple[int, str]]:
    """(layer, module) pairs PEFT really wraps with LoRA for these settings, as training builds them."""
    from peft import get_peft_model

    targets, layers = resolve_lora_targets(model, settings["lora"]["target_modules"], settings["lora"].get("layers"))
    check_lora_targets(model, targets)
    peft_model = get_peft_model(copy.deepcopy(model), lora_config(Training.from_dict(settings).lora, targets, layers))
    out = set()
    for name, module in peft_model.named_modules():
        if hasattr(module, "lora_A") and name.split(".")[-1] != "lora_A":
            parts = name.split(".")
            i = parts.index("layers")
            out.add((int(parts[i + 1]), parts[-1]))
    return out


@pytest.mark.parametrize("group", ["attention", "mlp", "all-linear"])
def test_groups_adapt_the_models_own_modules_on_every_layer(model, group):
    kind, m = model
    want = {"attention": ATTENTION, "mlp": MLP}.get(group, {k: ATTENTION[k] | MLP[k] for k in ATTENTION})[kind]
    adapted = _adapted(m, {"lora": {"r": 2, "alpha": 4, "target_modules": group}})
    assert adapted == {(i, n) for i in range(4) for n in want}


def test_a_layer_range_adapts_only_those_layers(model):
    kind, m = model
    adapted = _adapted(m, {"lora": {"r": 2, "alpha": 4, "target_modules": "attention", "layers": [1, 2]}})
    assert adapted == {(i, n) for i in (1, 2) for n in ATTENTION[kind]}
    adapted = _adapted(m, {"lora": {"r": 2, "alpha": 4, "target_modules": "all-linear", "layers": [3, 3]}})
    assert adapted == {(3, n) for n in ATTENTION[kind] | MLP[kind]}


def test_groups_mix_with_module_names():
    m = _model("llama")
    targets, layers = resolve_lora_targets(m, ["mlp", "q_proj"])
    assert set(targets) == {"gate_proj", "up_proj", "down_proj", "q_proj"} and layers is None


def test_plain_all_linear_and_lists_go_to_peft_unchanged():
    m = _model("llama")
    assert resolve_lora_targets(m, "all-linear") == ("all-linear", None)
    assert resolve_lora_targets(m, ["q_proj", "v_proj"]) == (["q_proj", "v_proj"], None)


def test_a_range_outside_the_model_is_one_line_naming_the_field():
    m = _model("qwen2")
    with pytest.raises(UserError, match=r"training\.lora\.layers \[2, 4\].*4 decoder layers.*<= 3") as err:
        resolve_lora_targets(m, "attention", [2, 4])
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="training.lora.layers"):
        resolve_lora_targets(m, "attention", [3, 1])


def test_unset_layers_keep_the_fingerprint_of_runs_made_before_the_field():
    base = {"num_generations": 4, "lora": {"r": 2, "alpha": 4}}
    assert "layers" not in trajectory_settings(Training.from_dict(base))["lora"]
    ranged = trajectory_settings(Training.from_dict({**base, "lora": {"r": 2, "alpha": 4, "layers": [0, 1]}}))
    assert ranged["lora"]["layers"] == [0, 1]


def test_the_schema_accepts_groups_and_ranges_and_refuses_a_bad_range():
    from grpo_budget.config import settings

    t = settings.Training.from_dict({"lora": {"target_modules": "mlp", "layers": [0, 11]}})
    assert t.lora.layers == [0, 11] and t.lora.target_modules == "mlp"
    with pytest.raises(schema.ConfigError, match=r"training\.lora\.layers"):
        settings.Training.from_dict({"lora": {"layers": [0]}})


def test_training_adapts_the_group_on_the_range(tmp_path, tiny_model_dir):
    """Through training.train: the saved adapter is the attention group of layer 1 only."""
    import json

    from grpo_budget.prepare import framearith

    items = framearith.generate(8, seed=0, width=4, min_ops=1, max_ops=3)
    items.to_parquet(tmp_path / "subset.parquet")
    settings = {"num_generations": 2, "prompts_per_step": 2, "max_steps": 1, "save_steps": 1,
                "max_completion_length": 4, "lora": {"r": 2, "alpha": 4, "target_modules": "attention",
                                                     "layers": [1, 1]}}
    dataset = {"grading": {"mode": "lenient", "pattern": r"=\s*(-?\d+)"}, "prompt": {"chat_template": False}}
    manifest = training.train(tmp_path / "subset.parquet", str(tiny_model_dir), tmp_path / "ck",
                              tmp_path / "log.parquet", tmp_path / "m.json", Training.from_dict(settings), dataset,
                              seed=0)
    adapter = json.loads((tmp_path / "ck" / "checkpoint-1" / "adapter_config.json").read_text())
    assert set(adapter["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj"}
    assert adapter["layers_to_transform"] == [1] and manifest["final_step"] == 1
