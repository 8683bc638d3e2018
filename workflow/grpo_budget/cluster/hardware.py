"""The default rates of the cost plan where nothing was measured: the roofline of one A100-SXM4-80GB per GPU job,
from published figures."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hardware:
    """The roofline of the default rates. A decoding step reads every weight once (memory-bound for small batches)
    and costs 2 FLOPs per parameter per sequence (compute-bound for large ones); training costs 6 FLOPs per
    parameter per token."""

    peak_flops: float = 312e12  # A100 dense BF16 tensor-core FLOP/s (NVIDIA A100 datasheet)
    memory_bw: float = 2.039e12  # A100-SXM4-80GB HBM2e bytes/s (NVIDIA A100 datasheet)
    memory_efficiency: float = 0.77  # share of memory bandwidth a batch-1 vLLM decode reaches: 75 tok/s for
    #   Llama-3.1-8B on an A100-40GB, "77% of the memory-bandwidth ceiling" (johnmusgrave.com, vLLM 0.23 sweep)
    generate_mfu: float = 0.2  # batched vLLM decoding at max_num_seqs: 4,100 tok/s at 7.6B and 2,100 at 14.8B
    #   under this model vs 3,363 (DeepSeek-R1-Distill-Qwen-7B) and 3,004 (-14B) tok/s measured on one A100-80GB
    #   with vLLM's defaults (morphllm.com/vllm-benchmarks): within 30%
    train_mfu: float = 0.3  # ours: forward + backward at 6 FLOPs/param/token (Kaplan et al. 2020) -- an upper
    #   bound for LoRA, which skips the base weights' gradients -- at 30% of peak
    concurrency: int = 256  # sequences decoded at once: vLLM's max_num_seqs default
    startup_s: float = 120.0  # ours: process start, CUDA/vLLM initialisation and graph capture
    load_s_per_b: float = 4.0  # ours: 2 GB of bf16 weights per billion parameters read at ~0.5 GB/s

    def startup(self, size_b: float) -> float:
        return self.startup_s + self.load_s_per_b * size_b

    def decode_step(self, size_b: float, batch: int) -> float:
        """Seconds of one decoding step of ``batch`` sequences."""
        params = max(size_b, 1e-3) * 1e9
        memory = 2 * params / (self.memory_bw * self.memory_efficiency)
        compute = 2 * params * batch / (self.peak_flops * self.generate_mfu)
        return max(memory, compute)

    def generate_rate(self, size_b: float, batch: int | None = None) -> float:
        """Tokens generated per second with ``batch`` sequences in flight (default: a full engine)."""
        batch = self.concurrency if batch is None else batch
        return batch / self.decode_step(size_b, batch)

    def train_rate(self, size_b: float, checkpointing: bool = False) -> float:
        """Tokens trained on per second (forward and backward; with gradient checkpointing, the forward again)."""
        rate = self.peak_flops * self.train_mfu / (6 * max(size_b, 1e-3) * 1e9)
        return rate / RECOMPUTE if checkpointing else rate


# Gradient checkpointing runs each layer's forward twice. A LoRA step's backward computes only the activations'
# gradients (the base weights are frozen): about one forward's FLOPs, so the step is two forwards and checkpointing
# makes it three. Measured on an H200 (../shared/gpu/memory-check-h200.csv): 1.39-1.73 x.
RECOMPUTE = 3 / 2


DEFAULTS = Hardware()
DEFAULT_SOURCE = "default (A100)"
