"""LoRA adapters: PEFT's config, named target groups and layer ranges resolved on a model, and a check that every
target exists (PEFT silently skips names that match nothing)."""

from __future__ import annotations

import re

from grpo_budget.errors import UserError
from grpo_budget.config.settings import Lora


def lora_config(lora: Lora, target_modules=None, layers: list[int] | None = None):
    """PEFT's ``LoraConfig``; ``target_modules`` and ``layers`` as :func:`resolve_lora_targets` gives them (by
    default the settings' own target modules on every layer)."""
    from peft import LoraConfig

    extra = {"layers_to_transform": list(layers), "layers_pattern": "layers"} if layers is not None else {}
    return LoraConfig(
        r=int(lora.r),
        lora_alpha=int(lora.alpha),
        lora_dropout=float(lora.dropout),
        target_modules=lora.target_modules if target_modules is None else target_modules,
        task_type="CAUSAL_LM",
        **extra,
    )


# Named groups of LoRA target modules: the linear layers under this submodule of every decoder layer (the names of
# Llama, Qwen2/3, Mistral and Phi-3 layouts alike: q/k/v/o_proj or a fused qkv_proj under self_attn; gate/up/down_proj
# or a fused gate_up_proj under mlp). all-linear: every linear layer of the decoder layers.
LORA_GROUPS = {"attention": "self_attn", "mlp": "mlp"}
ALL_LINEAR = "all-linear"


def _decoder_layers(model) -> tuple[str, int]:
    """The path of the model's list of decoder layers (``model.layers``) and how many there are."""
    import torch

    found = [(name, len(m)) for name, m in model.named_modules()
             if isinstance(m, torch.nn.ModuleList) and name.rsplit(".", 1)[-1] == "layers" and len(m)]
    if not found:
        raise UserError(f"{type(model).__name__} has no list of decoder layers named 'layers': LoRA groups "
                        f"({', '.join(LORA_GROUPS)}) and training.lora.layers need one; list module names instead")
    return found[0]


def _layer_linears(model) -> list[str]:
    """The linear layers of the decoder layers, as paths inside one layer (``self_attn.q_proj``), in model order."""
    import torch
    from transformers.pytorch_utils import Conv1D

    prefix, _ = _decoder_layers(model)
    out = []
    for name, module in model.named_modules():
        if name.startswith(prefix + ".") and isinstance(module, (torch.nn.Linear, Conv1D)):
            inner = name[len(prefix) + 1:].split(".", 1)
            if len(inner) == 2 and inner[0].isdigit():
                out.append(inner[1])
    return list(dict.fromkeys(out))


def resolve_lora_targets(model, target_modules, layers: list[int] | None = None):
    """PEFT's ``target_modules`` and ``layers_to_transform`` for the configured targets on ``model``.

    ``target_modules``: a list of module names and named groups, or one name or group: ``attention`` (the linear
    layers under each decoder layer's ``self_attn``), ``mlp`` (under ``mlp``), ``all-linear``. ``layers``:
    ``[start, end]`` of the decoder layers to adapt (0-based, both included), or None for all. Groups become the
    model's own module names (so Phi-3's fused ``qkv_proj`` is what ``attention`` means there). A plain string
    other than a group without ``layers`` (``all-linear``, a regex) goes to PEFT unchanged, as before groups existed.
    """
    names = [target_modules] if isinstance(target_modules, str) else list(target_modules)
    groups = [n for n in names if n in LORA_GROUPS or n == ALL_LINEAR]
    if isinstance(target_modules, str) and layers is None and target_modules not in LORA_GROUPS:
        return target_modules, None
    if isinstance(target_modules, str) and not groups:
        raise UserError(f"training.lora.target_modules {target_modules!r} is a single pattern, which PEFT cannot "
                        "restrict to training.lora.layers; allowed with layers: a list of module names, "
                        f"{', '.join(LORA_GROUPS)} or {ALL_LINEAR}")
    transform = None
    if layers is not None:
        _, n_layers = _decoder_layers(model)
        start, end = (int(x) for x in layers)
        if not 0 <= start <= end < n_layers:
            raise UserError(f"training.lora.layers {list(layers)} is not a range of this model's {n_layers} decoder "
                            f"layers; allowed: [start, end] with 0 <= start <= end <= {n_layers - 1}")
        transform = list(range(start, end + 1))
    resolved: list[str] = []
    if groups:
        linears = _layer_linears(model)
        for n in names:
            if n == ALL_LINEAR:
                resolved += [p.rsplit(".", 1)[-1] for p in linears]
            elif n in LORA_GROUPS:
                mine = [p.rsplit(".", 1)[-1] for p in linears if p.startswith(LORA_GROUPS[n] + ".")]
                if not mine:
                    raise UserError(f"LoRA group {n!r} matches no linear layer under {LORA_GROUPS[n]} in the decoder "
                                    f"layers of {type(model).__name__}, whose linear layers are "
                                    f"{', '.join(linears) or '(none)'}: fix training.lora.target_modules")
                resolved += mine
            else:
                resolved.append(n)
    else:
        resolved = names
    return list(dict.fromkeys(resolved)), transform


def check_lora_targets(model, target_modules) -> None:
    """Refuse LoRA ``target_modules`` names that match no module of ``model``, before training.

    PEFT adapts the modules whose full name equals a listed name or ends with ``"." + name`` and, as long as one
    name matches something, silently skips the rest: Llama-style names on a Phi-3 layout (fused ``qkv_proj`` and
    ``gate_up_proj``, e.g. microsoft/phi-4) would adapt only ``o_proj`` and ``down_proj``. A string (such as
    ``"all-linear"``) is left to PEFT.
    """
    if isinstance(target_modules, str):
        if target_modules != ALL_LINEAR and not any(re.fullmatch(target_modules, n)
                                                    for n, _ in model.named_modules() if n):
            # PEFT would refuse it too, but only once the trainer is built (after a run's checkpoints are claimed)
            raise UserError(f"training.lora.target_modules {target_modules!r} (a pattern PEFT matches against whole "
                            f"module names) matches no module of {type(model).__name__}; allowed: "
                            f"{', '.join(LORA_GROUPS)}, {ALL_LINEAR}, module names or a pattern")
        return
    import torch
    from transformers.pytorch_utils import Conv1D  # GPT-2's linear layer

    names = [name for name, _ in model.named_modules() if name]
    missing = [t for t in dict.fromkeys(target_modules)
               if not any(n == t or n.endswith(f".{t}") for n in names)]
    if not missing:
        return
    linear = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                     if name and isinstance(module, (torch.nn.Linear, Conv1D))})
    path = getattr(getattr(model, "config", None), "_name_or_path", "")
    model_name = f"{path} ({type(model).__name__})" if path else type(model).__name__
    raise UserError(
        f"LoRA target modules {', '.join(missing)} match no module of {model_name}, and PEFT would silently "
        f"skip them; its linear layers are "
        f"{', '.join(linear) or '(none)'}: fix training.lora.target_modules (or use all-linear)"
    )
