"""LoRA target modules must exist in the model: PEFT silently skips names that match nothing (as long as one
name matches), e.g. Llama-style q/k/v and gate/up names on Phi-3's fused qkv_proj and gate_up_proj."""

from pathlib import Path

import pytest

from grpo_budget.errors import UserError
from grpo_budget.config.settings import Training
from grpo_budget.prepare import framearith
from grpo_budget.train import training
from grpo_budget.train.lora import check_lora_targets

LLAMA_NAMES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
PHI3_NAMES = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
TINY = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
            num_key_value_heads=2, max_position_embeddings=64,
            bos_token_id=1, eos_token_id=2, pad_token_id=0)


@pytest.fixture(scope="module")
def phi3():
    from transformers import Phi3Config, Phi3ForCausalLM

    return Phi3ForCausalLM(Phi3Config(**TINY))


@pytest.fixture(scope="module")
def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(**TINY))


def test_llama_names_on_phi3_fail_naming_missing_and_available(phi3):
    with pytest.raises(UserError) as err:
        check_lora_targets(phi3, LLAMA_NAMES)
    msg = str(err.value)
    assert "\n" not in msg
    missing = msg.split("target modules ")[1].split(" match no module")[0].split(", ")
    assert missing == ["q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"]  # o_proj, down_proj do exist
    available = msg.split("linear layers are ")[1].split(":")[0].split(", ")
    assert available == ["down_proj", "gate_up_proj", "lm_head", "o_proj", "qkv_proj"]
    assert "training.lora.target_modules" in msg


def test_phi3_names_pass_on_phi3(phi3):
    check_lora_targets(phi3, PHI3_NAMES)


def test_all_linear_passes(phi3, llama):
    check_lora_targets(phi3, "all-linear")
    check_lora_targets(llama, "all-linear")


def test_llama_names_pass_on_llama(llama):
    check_lora_targets(llama, LLAMA_NAMES)


def test_train_refuses_missing_target_before_any_checkpoint(tmp_path, tiny_model_dir):
    items = framearith.generate(8, seed=0, width=4, min_ops=1, max_ops=3)
    subset = tmp_path / "subset.parquet"
    items.to_parquet(subset)
    settings = {"num_generations": 2, "prompts_per_step": 2, "max_steps": 1, "save_steps": 1,
                "max_completion_length": 4, "lora": {"r": 2, "alpha": 4, "target_modules": ["nonexistent_proj"]}}
    dataset = {"grading": {"mode": "lenient", "pattern": r"=\s*(-?\d+)"}, "prompt": {"chat_template": False}}
    with pytest.raises(UserError, match="nonexistent_proj.*training.lora.target_modules"):
        training.train(subset, str(tiny_model_dir), tmp_path / "ck", tmp_path / "log.parquet",
                       tmp_path / "manifest.json", Training.from_dict(settings), dataset, seed=0)
    assert not list((tmp_path / "ck").glob("checkpoint-*"))
    assert not (tmp_path / "log.parquet").exists() and not (tmp_path / "manifest.json").exists()


def test_all_linear_adapts_the_fused_layers_on_phi3(phi3):
    """all-linear on Phi-3 covers what q,k,v,o,gate,up,down cover on a Llama layout (configs/hard-examples.yaml)."""
    import copy

    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=2, target_modules="all-linear", task_type="CAUSAL_LM")
    peft_model = get_peft_model(copy.deepcopy(phi3), config)
    adapted = {name.rsplit(".", 1)[-1] for name in peft_model.peft_config["default"].target_modules}
    assert adapted == set(PHI3_NAMES)


def test_hard_examples_config_targets_all_linear():
    import yaml

    cfg = yaml.safe_load((Path(__file__).resolve().parents[2] / "configs" / "hard-examples.yaml").read_text())
    assert "phi-4" in cfg["models"] and cfg["training"]["lora"]["target_modules"] == "all-linear"
