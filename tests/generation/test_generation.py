"""The generation interface: transformers backend on a real tiny model; vLLM request building without vLLM."""

import importlib.util
from types import SimpleNamespace

import pytest

from grpo_budget.errors import UserError
from grpo_budget.generation import backends, prompts
from grpo_budget.generation import vllm_args
from grpo_budget.generation.sampling import Completion, Sampling


def test_transformers_backend_shapes_and_reproducibility(tiny_model_dir):
    gen = backends.make_generator("transformers", str(tiny_model_dir), device="cpu", batch_size=8, progress=False)
    ps = ["+1 +2 . . ?", "-3 . . . ?", "+9 +9 +9 . ?"]
    s = Sampling(n=3, temperature=1.0, top_p=1.0, max_new_tokens=5, seed=11)
    a, b = gen.generate(ps, s), gen.generate(ps, s)
    assert [len(x) for x in a] == [3, 3, 3]
    assert a == b  # same seed, same samples, whatever batch size
    assert all(1 <= c.n_tokens <= 5 and isinstance(c.text, str) for x in a for c in x)
    other = backends.make_generator("transformers", str(tiny_model_dir), device="cpu", batch_size=3, progress=False)
    assert [len(x) for x in other.generate(ps, s)] == [3, 3, 3]


def test_prompts_tokenized_like_trl(tiny_model_dir):
    tok = backends.load_tokenizer(str(tiny_model_dir))
    ids = prompts.tokenize(tok, "+1 +2 . . ?")
    assert ids == tok(text="+1 +2 . . ?")["input_ids"] and len(ids) == 5
    assert prompts.build("Q", "Do it.", chat=True) == [{"role": "user", "content": "Q\n\nDo it."}]
    assert prompts.use_chat(tok, "auto") is False


def test_unknown_backend():
    with pytest.raises(ValueError, match="allowed: transformers, vllm"):
        backends.make_generator("sglang", "x")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_vllm_backend_without_vllm_fails_clearly():
    with pytest.raises(UserError, match="vLLM is not installed"):
        backends.make_generator("vllm", "some/model")


def test_vllm_sampling_params_always_set_max_tokens():
    kw = vllm_args.vllm_sampling_kwargs(Sampling(n=10, temperature=1.0, top_p=1.0, max_new_tokens=250, seed=3))
    assert kw == {"n": 10, "temperature": 1.0, "top_p": 1.0, "max_tokens": 250, "seed": 3}
    assert vllm_args.vllm_sampling_kwargs(Sampling(n=1, temperature=0.0, top_p=0.9, max_new_tokens=8, seed=0))["top_p"] == 1.0


def test_vllm_engine_kwargs_enable_lora_with_rank():
    kw = vllm_args.vllm_engine_kwargs(True, 32, {"gpu_memory_utilization": 0.8})
    assert kw["enable_lora"] and kw["max_lora_rank"] == 32 and kw["gpu_memory_utilization"] == 0.8


def test_parse_vllm_output():
    # RequestOutput/CompletionOutput shaped records (vLLM cannot be imported on a CPU machine).
    out = SimpleNamespace(outputs=[
        SimpleNamespace(text=" 7 0 = 0", token_ids=[5, 6, 7, 1], finish_reason="stop", stop_reason=None),  # 1 = EOS
        SimpleNamespace(text="7 0 5 4", token_ids=[5, 6, 7, 9], finish_reason="length", stop_reason=None),
    ])
    assert vllm_args.parse_vllm_output(out) == [Completion("7 0 = 0", 4, True), Completion("7 0 5 4", 4, False)]


def test_prompt_template_puts_the_question_in_verbatim():
    """Paper 1's GSM8K prompt: "{question}.\\nPut your final answer within \\boxed{}." as one user message."""
    template = "{question}.\nPut your final answer within \\boxed{}."
    assert prompts.build("What is 2+2", template=template) == "What is 2+2.\nPut your final answer within \\boxed{}."
    assert prompts.build("Q", "ignored", chat=True, template=template)[0]["content"].startswith("Q.\nPut")
    assert prompts.build("Q", "Answer.") == "Q\n\nAnswer."  # the instruction form is unchanged


def test_top_k_left_to_the_model_as_hf_generate_does():
    """Paper 1 sampled with HF generate and no top_k: the model's generation_config value applies (20 for Qwen3)."""
    base = dict(n=2, temperature=1.0, top_p=1.0, max_new_tokens=8, seed=0)
    assert vllm_args.vllm_sampling_kwargs(Sampling(**base, top_k=None), model_top_k=20)["top_k"] == 20
    assert "top_k" not in vllm_args.vllm_sampling_kwargs(Sampling(**base, top_k=0))  # no cut: vLLM's default
    assert vllm_args.vllm_sampling_kwargs(Sampling(**base, top_k=5), model_top_k=20)["top_k"] == 5
    # neither the model nor the config sets one: HF generate cuts at its global default (50), so vLLM must too
    assert vllm_args.vllm_sampling_kwargs(Sampling(**base, top_k=None))["top_k"] == 50 == vllm_args.hf_default_top_k()
    assert vllm_args.vllm_sampling_kwargs(Sampling(**base, top_k=None), model_top_k=-1)["top_k"] == 50  # vLLM: unset
    assert "top_k" not in vllm_args.vllm_sampling_kwargs(Sampling(**{**base, "temperature": 0.0}, top_k=None))


def test_hf_generate_applies_the_default_top_k_the_vllm_backend_mirrors(tiny_model_dir):
    """What the transformers backend does with top_k unset, read off transformers' own generation setup: its
    processors cut at 50 when the model's generation_config sets no top_k."""
    from transformers import AutoModelForCausalLM, GenerationConfig, TopKLogitsWarper

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert model.generation_config.top_k is None
    config, _ = model._prepare_generation_config(GenerationConfig(do_sample=True))
    assert config.top_k == vllm_args.hf_default_top_k()
    warpers = model._get_logits_processor(config, input_ids_seq_length=1, encoder_input_ids=None,
                                          prefix_allowed_tokens_fn=None, logits_processor=None)
    assert any(isinstance(w, TopKLogitsWarper) and w.top_k == 50 for w in warpers)


def test_top_k_none_uses_the_generation_config(tiny_model_dir, tmp_path):
    """With top_k None the transformers backend takes the model's generation_config top_k: a config of top_k=1
    makes sampling greedy, so every sample equals the greedy one."""
    import shutil

    from transformers import GenerationConfig

    model_dir = tmp_path / "m"
    shutil.copytree(tiny_model_dir, model_dir)
    GenerationConfig(do_sample=True, top_k=1, eos_token_id=1, pad_token_id=0).save_pretrained(model_dir)
    gen = backends.make_generator("transformers", str(model_dir), device="cpu", batch_size=8, progress=False)
    prompt = ["+1 +2 . ?"]
    free = gen.generate(prompt, Sampling(n=6, temperature=1.0, top_p=1.0, max_new_tokens=6, seed=3, top_k=None))
    greedy = gen.generate(prompt, Sampling(n=1, temperature=0.0, top_p=1.0, max_new_tokens=6, seed=3))
    assert {c.text for c in free[0]} == {greedy[0][0].text}


def test_vllm_enables_lora_only_for_jobs_that_load_adapters():
    """Scoring, verification and the base model's evaluation load no adapter: no LoRA slots (memory, and vLLM's
    LoRA kernels) for them."""
    assert not {"enable_lora", "max_lora_rank", "max_loras"} & set(vllm_args.vllm_engine_kwargs(False, 32, {}))
    assert vllm_args.vllm_engine_kwargs(True, 32, {})["enable_lora"] is True


@pytest.mark.parametrize("dtype, on_gpu, expected", [
    ("auto", False, "float32"),  # the CPU default: as the transformers backend loads it there
    ("bfloat16", False, "bfloat16"),  # models.NAME.dtype wins everywhere
    ("float16", True, "float16"),
    ("auto", True, None),  # vLLM's own auto: the config's torch_dtype
])
def test_vllm_engine_takes_the_models_dtype(dtype, on_gpu, expected):
    assert vllm_args.vllm_engine_kwargs(False, 16, {}, on_gpu=on_gpu, dtype=dtype).get("dtype") == expected


def test_transformers_backend_loads_the_models_dtype(tiny_model_dir):
    import torch

    from grpo_budget.config.settings import Generation

    for dtype, expected in (("auto", torch.float32), ("bfloat16", torch.bfloat16)):
        gen = backends.from_settings(str(tiny_model_dir), Generation.from_dict({"dtype": dtype, "device": "cpu"}))
        assert next(gen.model.parameters()).dtype == expected


def test_a_prompt_longer_than_the_engines_context_is_refused_by_name():
    vllm_args.check_lengths([[1] * 10], 20, 30)
    with pytest.raises(UserError, match="item-7: its prompt has 11 tokens.*gpu.max_prompt_tokens"):
        vllm_args.check_lengths([[1] * 10, [1] * 11], 20, 30, keys=["item-6", "item-7"])


def test_an_items_samples_do_not_depend_on_the_rest_of_its_job(tiny_model_dir):
    """Each row samples from its own stream keyed by (seed, item key, sample index), as the vLLM backend seeds each
    request: an item scored beside others, alone, or at another place gets the same samples (prompts of one length,
    so that padding does not change the logits either)."""
    gen = backends.make_generator("transformers", str(tiny_model_dir), device="cpu", batch_size=64, progress=False)
    ps = ["+1 +2 . ?", "-3 +4 . ?", "+5 -6 . ?"]
    assert len({len(gen.prompt_ids([p])[0]) for p in ps}) == 1
    s = Sampling(n=4, temperature=1.0, top_p=1.0, max_new_tokens=6, seed=5)
    together = gen.generate(ps, s, keys=["a", "b", "c"])
    assert gen.generate(ps[1:2], s, keys=["b"]) == together[1:2]
    assert gen.generate([ps[2], ps[0]], s, keys=["c", "a"]) == [together[2], together[0]]
    assert gen.generate(ps, Sampling(**{**s.__dict__, "seed": 6}), keys=["a", "b", "c"]) != together


def test_keyed_sampling_draws_from_the_warped_distribution():
    """The draws over 40,000 rows match softmax(logits / T) after top-k and top-p, within 4 SE."""
    import math

    import torch

    from grpo_budget.generation.keyed import KeyedSampler, row_seeds, uniforms

    u = uniforms(torch.tensor([1, 2], dtype=torch.int64), 0, 100_000)
    assert 0 < float(u.min()) and float(u.max()) < 1 and abs(float(u.mean()) - 0.5) < 0.005
    assert abs(float(torch.corrcoef(u)[0, 1])) < 0.02  # two seeds: unrelated streams
    rows = 40_000
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05])).repeat(rows, 1)
    seeds = row_seeds(7, [str(i) for i in range(rows)], 1)
    cases = [(1.0, 0, 1.0, [0.5, 0.3, 0.15, 0.05]),
             (2.0, 0, 1.0, [math.sqrt(p) for p in (0.5, 0.3, 0.15, 0.05)]),  # T = 2: p^(1/2), renormalised
             (1.0, 2, 1.0, [0.5, 0.3, 0, 0]),  # top-k 2
             (1.0, 0, 0.7, [0.5, 0.3, 0, 0])]  # top-p 0.7 keeps 0.5 + 0.3
    for temperature, top_k, top_p, weights in cases:
        want = torch.tensor(weights) / sum(weights)
        pick = KeyedSampler(seeds, 3, temperature, top_k, top_p, "cpu")(torch.zeros(rows, 3, dtype=torch.long), logits)
        assert bool((pick.max(dim=1).values == 0).all()) and bool((torch.isinf(pick).sum(1) == 3).all())
        freq = torch.bincount(pick.argmax(dim=1), minlength=4).double() / rows
        se = torch.sqrt(want * (1 - want) / rows)
        assert bool((freq - want).abs().le(4 * se + 1e-9).all()), (temperature, top_k, top_p, freq, want)


def test_training_samples_with_scorings_top_k(tmp_path, tiny_model_dir):
    """One sampling definition: training.top_k null means what scoring's null means (the model's generation_config
    value, else transformers' 50), resolved to a number before TRL, whose transformers and vLLM paths read None
    differently; 0 is no cut in both."""
    import shutil

    from transformers import GenerationConfig

    from grpo_budget.config.settings import Training
    from grpo_budget.train.training import grpo_config

    assert vllm_args.effective_top_k(None, vllm_args.model_top_k(str(tiny_model_dir))) == 50
    model = tmp_path / "m"
    shutil.copytree(tiny_model_dir, model)
    GenerationConfig(do_sample=True, top_k=20).save_pretrained(model)
    assert vllm_args.effective_top_k(None, vllm_args.model_top_k(str(model))) == 20
    assert vllm_args.effective_top_k(0, 20) == 0 and vllm_args.effective_top_k(5, 20) == 5
    t = Training.from_dict({"max_steps": 2, "top_k": 7})
    assert grpo_config(t, tmp_path / "out", seed=0, on_gpu=False).top_k == 7
    assert grpo_config(Training.from_dict({"max_steps": 2}), tmp_path / "out", seed=0, on_gpu=False).top_k == 0
