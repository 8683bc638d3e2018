"""The memory plan against a GPU: one GRPO-shaped LoRA training step (forward and backward over a micro-batch of
prompt + completion tokens, loss on the completion's log-probabilities) of each paper model, random-initialised
from its real shapes (cluster/model_configs/: no download), with measured peak GPU memory and seconds per step
printed beside the memory plan's and the cost plan's predictions for the same job.

    python perf/memory_check.py                                  # every bundled model that fits the card
    python perf/memory_check.py --models Qwen--Qwen3-4B --micro-batch 8 --prompt 1024 --completion 250
    python perf/memory_check.py --device cpu --layers 1 --hidden 64  # a shrunk smoke run (tests use it)

Only the training side is measured (weights, LoRA+Adam, activations): vLLM's share is not (no vLLM wheel offline).
"""

from __future__ import annotations

import argparse
import json
import time

from grpo_budget.cluster.activations import training_step
from grpo_budget.hardware import DEFAULTS
from grpo_budget.cluster.shapes import BUNDLED, DTYPE_BYTES, Shape

GIB = 2**30


def build(config: dict, device: str, dtype: str, lora_r: int):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    c = {k: v for k, v in config.items() if k != "architectures"}
    cfg = AutoConfig.for_model(c.pop("model_type"), **c)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype))
    model = get_peft_model(model, LoraConfig(r=lora_r, lora_alpha=lora_r, target_modules="all-linear"))
    return model


def step(model, micro_batch: int, prompt: int, completion: int, checkpointing: bool, device: str) -> float:
    """One optimizer step on random tokens; returns its seconds."""
    import torch

    ids = torch.randint(0, model.config.vocab_size, (micro_batch, prompt + completion), device=device)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    logits = model(input_ids=ids, logits_to_keep=completion + 1).logits[:, :-1]
    logps = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, prompt:, None]).squeeze(-1)
    (-logps.mean()).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    sync()
    return time.perf_counter() - start


def predicted(shape: Shape, micro_batch: int, prompt: int, completion: int, checkpointing: bool, b: int,
              lora_r: int) -> dict:
    # no padding mask here, so transformers' SDPA keeps k and v at their own (grouped) width
    parts = training_step(shape, micro_batch, prompt + completion, completion, b, checkpointing, lora_r, "all-linear",
                          masked=False)
    tokens = micro_batch * (prompt + completion)
    return {"memory_gib": sum(parts.values()) / GIB, **{f"{k}_gib": v / GIB for k, v in parts.items()},
            "step_s": tokens / DEFAULTS.train_rate(shape.parameters() / 1e9)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="*", default=None, help="bundled config names (default: all)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--micro-batch", type=int, default=8, help="completions per micro-batch (paper 1: 1 x G=8)")
    p.add_argument("--prompt", type=int, default=256)
    p.add_argument("--completion", type=int, default=250)
    p.add_argument("--lora-r", type=int, default=32)
    p.add_argument("--layers", type=int, default=None, help="shrink to this many decoder layers (smoke runs)")
    p.add_argument("--hidden", type=int, default=None, help="shrink the width (smoke runs)")
    a = p.parse_args(argv)
    import torch

    names = a.models or sorted(f.stem for f in BUNDLED.glob("*.json"))
    card = torch.cuda.get_device_properties(0).total_memory if a.device == "cuda" else None
    for name in names:
        config = json.loads((BUNDLED / f"{name}.json").read_text())
        if a.layers:
            config["num_hidden_layers"] = a.layers
        if a.hidden:
            config.update(hidden_size=a.hidden, intermediate_size=4 * a.hidden, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=a.hidden // 4, vocab_size=min(config["vocab_size"], 4096),
                          pad_token_id=0)
        shape = Shape.from_config(config)
        for checkpointing in (True, False):
            want = predicted(shape, a.micro_batch, a.prompt, a.completion, checkpointing, DTYPE_BYTES[a.dtype],
                             a.lora_r)
            row = {"model": name, "checkpointing": checkpointing, "predicted": want}
            if card is not None and want["memory_gib"] * GIB > 0.95 * card:
                row["measured"] = "skipped: the plan says it does not fit this card"
            else:
                model = build(config, a.device, a.dtype, a.lora_r)
                if a.device == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                step(model, a.micro_batch, a.prompt, a.completion, checkpointing, a.device)  # warm-up
                seconds = step(model, a.micro_batch, a.prompt, a.completion, checkpointing, a.device)
                peak = torch.cuda.max_memory_allocated() / GIB if a.device == "cuda" else None
                row["measured"] = {"memory_gib": peak, "step_s": seconds}
                del model
                if a.device == "cuda":
                    torch.cuda.empty_cache()
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
