"""The default rates of the cost plan where nothing was measured: on ``device: cuda`` the roofline of one
A100-SXM4-80GB per GPU job, from published figures; on ``device: cpu`` (the GPU rules run on the CPU) rates measured
on 2 AMD EPYC cores (``perf/cpu_rates.py``)."""

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
    name: str = "A100"  # the plan's rate source reads "default (NAME)"
    bytes_per_param: int = 2  # bf16 weights
    step_overhead_s: float = 0.0  # a decoding step's fixed cost beyond the roofline
    seq_overhead_s: float = 0.0  # and its cost per sequence that does not grow with the parameters
    overlap: bool = True  # the weights are read while computing (a GPU); on a CPU the two add up (measured)

    @property
    def source(self) -> str:
        return f"default ({self.name})"

    def startup(self, size_b: float) -> float:
        return self.startup_s + self.load_s_per_b * size_b

    def decode_step(self, size_b: float, batch: int) -> float:
        """Seconds of one decoding step of ``batch`` sequences."""
        params = max(size_b, 1e-3) * 1e9
        memory = self.bytes_per_param * params / (self.memory_bw * self.memory_efficiency)
        compute = 2 * params * batch / (self.peak_flops * self.generate_mfu)
        overheads = self.step_overhead_s + self.seq_overhead_s * batch
        return overheads + (max(memory, compute) if self.overlap else memory + compute)

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
DEFAULT_SOURCE = DEFAULTS.source

# The GPU rules on device cpu: transformers' batched generate and a forward + backward in float32, measured by
# perf/cpu_rates.py on 2 AMD EPYC cores (load 0.6-2): effective rates, so the efficiencies are 1. A 135M Llama
# decodes a step of b sequences (b = 1..64) in 68-71 + 2.0-2.2 b ms: its float32 weights read at 7.8-8.1 GB/s and
# 124-132 GFLOP/s; it trains at 131-141 GFLOP/s (6 FLOPs per parameter per token). The tiny model's step costs
# 1.5-1.9 ms at batch 1 and 17 us more per sequence than its parameters say (sampling, attention over the cache).
# A job starts in ~5 s (the embedded default's evaluate_base: 5.9 s, 0.9 s of it generating, docs/results.md) plus
# 4 GB of float32 weights per billion parameters at ~1 GB/s.
CPU_DEFAULTS = Hardware(peak_flops=133e9, memory_bw=7.9e9, memory_efficiency=1.0, generate_mfu=1.0, train_mfu=1.0,
                        startup_s=5.0, load_s_per_b=4.0, name="CPU, 2 cores", bytes_per_param=4,
                        step_overhead_s=1.8e-3, seq_overhead_s=17e-6, overlap=False)


def defaults_for(device: str) -> Hardware:
    """The default rates of a config's ``device``: where its GPU rules run."""
    return CPU_DEFAULTS if device == "cpu" else DEFAULTS
