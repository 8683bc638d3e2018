"""A model's shapes (layers, widths, heads, vocabulary) from its ``config.json``, and the parameter and cache sizes
they imply; the memory plan (:mod:`grpo_budget.cluster.memory`) sizes every GPU job from them.

``config.json`` is read from the model's local folder, the fetched copy in ``model_store``, the Hugging Face hub cache,
or (for the paper configs' models, so a plan needs no download) the copies in ``cluster/model_configs/``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from grpo_budget.errors import UserError
from grpo_budget.hub import folder_name, is_hub_id

BUNDLED = Path(__file__).with_name("model_configs")  # config.json fields of the paper models, by hub id with / -> --
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
BIASED_QKV = {"Qwen2ForCausalLM"}  # q, k and v carry biases (their configs have no attention_bias field)
FUSED_PROJECTIONS = {"Phi3ForCausalLM"}  # one qkv_proj and one gate_up_proj module per layer


@dataclass(frozen=True)
class Shape:
    """The sizes of a decoder-only transformer (Llama, Qwen2/3, Phi-3 and their kin)."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool  # the output layer shares the input embedding's weights
    max_positions: int
    dtype: str  # the weights' dtype as saved (config torch_dtype)
    qkv_bias: bool = False
    qk_norm: bool = False  # Qwen3 normalises queries and keys per head
    fused: bool = False  # q, k, v and gate, up are fused modules (what PEFT adapts)

    @classmethod
    def from_config(cls, c: dict) -> "Shape":
        arch = (c.get("architectures") or [""])[0]
        heads = int(c["num_attention_heads"])
        return cls(hidden=int(c["hidden_size"]), intermediate=int(c["intermediate_size"]),
                   layers=int(c["num_hidden_layers"]), heads=heads,
                   kv_heads=int(c.get("num_key_value_heads") or heads),
                   head_dim=int(c.get("head_dim") or c["hidden_size"] // heads), vocab=int(c["vocab_size"]),
                   tied=bool(c.get("tie_word_embeddings", False)),
                   max_positions=int(c.get("max_position_embeddings") or 0),
                   dtype=str(c.get("torch_dtype") or c.get("dtype") or "float32"),
                   qkv_bias=bool(c.get("attention_bias", arch in BIASED_QKV)),
                   qk_norm=c.get("model_type") == "qwen3", fused=arch in FUSED_PROJECTIONS)

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    def parameters(self) -> int:
        """Every weight, embeddings and norms included (as ``sum(p.numel() for p in model.parameters())``)."""
        h, i = self.hidden, self.intermediate
        attention = h * self.q_width * 2 + h * self.kv_width * 2  # q, o; k, v
        if self.qkv_bias:
            attention += self.q_width + 2 * self.kv_width
        if self.qk_norm:
            attention += 2 * self.head_dim
        layer = attention + 3 * h * i + 2 * h  # gate, up, down; two RMSNorms
        embeddings = self.vocab * h * (1 if self.tied else 2)
        return self.layers * layer + embeddings + h

    def linears(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each linear layer of one decoder layer, by its Llama name (Phi-3's fused qkv_proj and
        gate_up_proj count as their parts: LoRA on the parts is the larger of the two)."""
        h, i = self.hidden, self.intermediate
        return {"q_proj": (h, self.q_width), "k_proj": (h, self.kv_width), "v_proj": (h, self.kv_width),
                "o_proj": (self.q_width, h), "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    def lora_parameters(self, r: int, target_modules: str | list[str], layers: int | None = None) -> int:
        """LoRA's A and B weights at rank ``r`` on the named layers (a name, group or all-linear, as
        ``training.lora.target_modules``) of ``layers`` decoder layers (default: all)."""
        chosen = targets(target_modules)
        per_layer = sum(r * (a + b) for name, (a, b) in self.linears().items() if name in chosen)
        return per_layer * (self.layers if layers is None else layers)

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        return 2 * self.layers * self.kv_width * dtype_bytes


GROUPS = {"attention": {"q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj"},
          "mlp": {"gate_proj", "up_proj", "down_proj", "gate_up_proj"}}
GROUPS["all-linear"] = GROUPS["attention"] | GROUPS["mlp"]
FUSED = {"qkv_proj": {"q_proj", "k_proj", "v_proj"}, "gate_up_proj": {"gate_proj", "up_proj"}}


def targets(target_modules: str | list[str]) -> set[str]:
    """The module names ``training.lora.target_modules`` adapts (groups expanded, a fused module with its parts)."""
    names: set[str] = set()
    for t in [target_modules] if isinstance(target_modules, str) else target_modules:
        names |= GROUPS.get(t, {t.rsplit(".", 1)[-1]})
    for fused, parts in FUSED.items():
        if fused in names:
            names |= parts
    return names


def dtype_bytes(dtype: str, shape: Shape) -> int:
    """Bytes per weight of a model loaded as ``dtype`` (``auto``: as saved)."""
    return DTYPE_BYTES.get(shape.dtype if dtype == "auto" else dtype, 2)


def find_config(path: str, model_store: str | None) -> Path | None:
    """The ``config.json`` of a model given as a folder or a hub id: the folder's, the fetched copy's, the hub
    cache's, else the bundled copy's; None when there is none."""
    candidates = [Path(path) / "config.json"]
    if model_store:
        candidates.append(Path(model_store) / folder_name(path) / "config.json")
    for c in candidates:
        if c.is_file():
            return c
    if is_hub_id(path):
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(path, "config.json")
        except Exception:  # an id the hub library refuses: not a hub model
            cached = None
        if isinstance(cached, str) and Path(cached).is_file():
            return Path(cached)
    bundled = BUNDLED / f"{folder_name(path)}.json"
    return bundled if bundled.is_file() else None


def load_shape(path: str, model_store: str | None = None) -> Shape | None:
    found = find_config(path, model_store)
    if found is None:
        return None
    try:
        return Shape.from_config(json.loads(found.read_text()))
    except (KeyError, ValueError, TypeError) as e:
        raise UserError(f"{found}: not the config.json of a decoder-only model the memory plan knows ({e})") from e
