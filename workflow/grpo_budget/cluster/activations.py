"""The activation memory of one LoRA training micro-batch: what autograd keeps for the backward pass, term by term,
and the peak it reaches beside the completion logits.

Every term is a tensor autograd saves (listed with ``torch.autograd.graph.saved_tensors_hooks`` on the real
transformers + PEFT modules; ``tests/cluster/test_activations.py`` checks the sum against that count for Llama,
Qwen3 and Phi-3 layers, and against the H200 peaks in ``../shared/gpu/memory-check-h200.csv``). Per token and layer:
- the RMSNorms upcast to float32 and keep their float32 input (Qwen3 also normalises q and k per head);
- PEFT keeps LoRA weights in float32 and casts each adapted module's input to it: every adapted module keeps its
  own float32 copy of its input (q, k and v three copies; a fused ``qkv_proj`` one), and its A output (a float32
  model keeps each input tensor once: within 6% above the count, the o projection's input counted where it is free);
- attention keeps q and k after RoPE, v, the output and the log-sum-exp (flash/efficient kernels: no
  seq x seq scores); with a padding mask transformers repeats k and v to the query heads first, and each layer
  keeps its own copy of the seq x seq mask;
- the MLP keeps the gate and up outputs and the activation's output.
The completion logits peak at the start of the backward pass: the model's logits, the float32 log-softmax kept for
backward, and its float32 gradient in and out. With gradient checkpointing each layer keeps only its input, and one
layer at a time is recomputed after the logits' gradients are gone.
"""

from __future__ import annotations

from grpo_budget.cluster.shapes import FUSED, Shape, targets

ADAPTER_BYTES = 4  # PEFT's autocast_adapter_dtype: LoRA weights (and the inputs cast to them) in float32
NORM_BYTES = 4  # RMSNorm computes in float32
LORA_STATE_BYTES = 16  # per LoRA weight: fp32 value, fp32 gradient, Adam's two fp32 moments


def _group(name: str) -> str:
    """The fused module a projection belongs to (q, k, v: qkv_proj; gate, up: gate_up_proj), else itself: the
    modules of one group read the same input tensor."""
    return next((fused for fused, parts in FUSED.items() if name in parts), name)


def lora_modules(shape: Shape) -> dict[str, int]:
    """Input width of each linear module of one decoder layer, as PEFT sees it (Phi-3's fused projections are one
    module each)."""
    widths = {name: fan_in for name, (fan_in, _) in shape.linears().items()}
    return {_group(name): w for name, w in widths.items()} if shape.fused else widths


def layer_bytes(shape: Shape, b: int, lora_r: int, lora_targets: str | list[str], masked: bool, seq: int) -> int:
    """Bytes per token one decoder layer keeps for its backward pass, weights in ``b`` bytes each, sequences of
    ``seq`` tokens; ``masked``: the batch carries a padding mask (TRL's batches do), so k and v are repeated to the
    query heads and attention keeps the layer's seq x seq mask."""
    h, q, kv, i = shape.hidden, shape.q_width, shape.kv_width, shape.intermediate
    per_head = shape.heads + shape.kv_heads if shape.qk_norm else 0
    norms = NORM_BYTES * (2 * h + (q + kv if shape.qk_norm else 0) + 2 + per_head)  # inputs and 1/rms
    chosen = targets(lora_targets)
    adapted = {name: width for name, width in lora_modules(shape).items() if name in chosen}
    if b != ADAPTER_BYTES:  # each adapted module casts its input to float32 and keeps the copy
        inputs = ADAPTER_BYTES * sum(adapted.values())
    else:  # no cast: modules that read one tensor (q, k, v; gate, up) keep it once
        inputs = ADAPTER_BYTES * sum({_group(name): width for name, width in adapted.items()}.values())
    lora = inputs + 4 * lora_r * len(adapted)
    kv_kept = q if masked else kv
    attention = b * (2 * q + 2 * kv_kept + (seq if masked else 0)) + 4 * shape.heads
    mlp = 3 * b * i
    return norms + lora + attention + mlp


def logits_bytes(shape: Shape, b: int) -> int:
    """Peak bytes per completion token of the logits and their float32 log-softmax, forward and backward."""
    return shape.vocab * (b + 3 * 4)


def activations(shape: Shape, micro_batch: int, seq: int, completion: int, b: int, checkpointing: bool,
                lora_r: int, lora_targets: str | list[str], masked: bool = True,
                lora_layers: int | None = None) -> float:
    """Peak activation bytes of one micro-batch of ``micro_batch`` sequences of ``seq`` tokens, ``completion`` of
    them scored; LoRA on ``lora_layers`` of the layers (default: all)."""
    tokens, scored = micro_batch * seq, micro_batch * completion
    adapted = shape.layers if lora_layers is None else lora_layers
    layer = tokens * layer_bytes(shape, b, lora_r, lora_targets, masked, seq)
    plain = tokens * layer_bytes(shape, b, lora_r, [], masked, seq)
    logits = scored * logits_bytes(shape, b)
    final_norm = tokens * NORM_BYTES * shape.hidden
    if not checkpointing:
        return layer * adapted + plain * (shape.layers - adapted) + logits + final_norm
    inputs = tokens * b * shape.hidden * shape.layers
    held = scored * shape.vocab * b  # the model's logits stay referenced while the layers run backward
    return inputs + final_norm + max(logits, held + layer)


def training_step(shape: Shape, micro_batch: int, seq: int, completion: int, b: int, checkpointing: bool,
                  lora_r: int, lora_targets: str | list[str], masked: bool = True,
                  lora_layers: int | None = None) -> dict[str, float]:
    """Bytes by part of one LoRA training step at its peak (what ``torch.cuda.max_memory_allocated`` counts): the
    weights, LoRA's float32 weights, gradients and Adam moments, and the activations."""
    return {"weights": shape.parameters() * b,
            "LoRA+Adam": shape.lora_parameters(lora_r, lora_targets, lora_layers) * LORA_STATE_BYTES,
            "activations": activations(shape, micro_batch, seq, completion, b, checkpointing, lora_r, lora_targets,
                                       masked, lora_layers)}
