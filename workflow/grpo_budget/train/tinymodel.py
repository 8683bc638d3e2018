"""Bootstrap the embedded default's base model: a word-level tokenizer and a ~1M-parameter Llama trained
from scratch on worked solutions, stopped at a calibrated level of competence.

Partial competence is a narrow window (pass rate goes from ~0.1 to ~1 within a minute of CPU training), so
the loop measures the sampled pass rate (every ``sparse_calib_every`` steps on the loss plateau, every
``calib_every`` steps once the smoothed loss falls below ``dense_below_loss``) and keeps the snapshot whose
pass rate is nearest ``target_pass_rate``. Downstream the folder is loaded like any hub model.
"""

from __future__ import annotations

import copy
import logging
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_budget.config.settings import Bootstrap
from grpo_budget.generation import grading
from grpo_budget.generation.backends import TransformersGenerator
from grpo_budget.generation.sampling import Sampling
from grpo_budget.io import atomic_path, write_json
from grpo_budget.prepare import framearith

log = logging.getLogger(__name__)

PAD, EOS, BOS, UNK = "[PAD]", "[EOS]", "[BOS]", "[UNK]"

def build_tokenizer(vocab: list[str]):
    """Word-level tokenizer over whitespace-separated tokens, wrapped for ``transformers``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    ids = {tok: i for i, tok in enumerate([PAD, EOS, BOS, UNK] + list(vocab))}
    core = Tokenizer(models.WordLevel(ids, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, eos_token=EOS, bos_token=BOS, unk_token=UNK)
    tok.padding_side = "left"
    return tok


def build_model(tokenizer, hidden_size: int, intermediate_size: int, num_layers: int, num_heads: int, seed: int):
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id
    )
    return model


def encode_examples(tokenizer, prompts: list[str], solutions: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded ``input_ids`` and ``labels`` (prompt and padding masked with -100; EOS ends every target)."""
    rows, labels = [], []
    for p, s in zip(prompts, solutions):
        p_ids = tokenizer(text=p)["input_ids"]
        s_ids = tokenizer(text=s)["input_ids"] + [tokenizer.eos_token_id]
        rows.append(p_ids + s_ids)
        labels.append([-100] * len(p_ids) + s_ids)
    width = max(map(len, rows))
    pad = tokenizer.pad_token_id
    x = np.array([r + [pad] * (width - len(r)) for r in rows])
    y = np.array([r + [-100] * (width - len(r)) for r in labels])
    return x, y


def pass_rate(model, tokenizer, items: pd.DataFrame, samples: int, max_new_tokens: int, seed: int,
              pattern: str) -> float:
    """Mean sampled pass rate (temperature 1) of ``model`` on ``items``, graded by the project's grader."""
    gen = TransformersGenerator(model, tokenizer, batch_size=1024)
    sampling = Sampling(n=samples, temperature=1.0, top_p=1.0, max_new_tokens=max_new_tokens, seed=seed)
    out = gen.generate(list(items["prompt"]), sampling)
    grades = [
        g.correct
        for comps, gold in zip(out, items["answer"])
        for g in grading.grade_many([c.text for c in comps], [gold] * len(comps), "number", "lenient", pattern)
    ]
    return float(np.mean(grades))


def bootstrap(out_dir: str | Path, task: dict, cfg: Bootstrap, exclude_prompts: list[str]) -> dict:
    """Train the base model and save the snapshot nearest the target pass rate to ``out_dir``."""
    import torch

    seed = cfg.seed
    torch.manual_seed(seed)
    params = framearith.resolve_params(task.get("params", {}))
    max_new = 2 * params["width"] + 4
    pattern = task["grading"]["pattern"]

    tok = build_tokenizer(framearith.VOCAB)
    model = build_model(tok, cfg.hidden_size, cfg.intermediate_size, cfg.num_layers, cfg.num_heads, seed)
    n_params = sum(p.numel() for p in model.parameters())
    log.info("tiny Llama with %d parameters", n_params)

    calib = framearith.generate(cfg.calib_items, seed + 1, **params, exclude=exclude_prompts)
    train = framearith.generate(
        cfg.train_items, seed + 2, **params, exclude=list(exclude_prompts) + list(calib["prompt"])
    )
    x, y = encode_examples(tok, list(train["prompt"]), list(train["solution"]))
    x, y = torch.tensor(x), torch.tensor(y)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=0.0)
    rng = np.random.default_rng(seed)

    history, best, smooth = [], None, None
    for step in range(1, cfg.max_steps + 1):
        model.train()
        idx = torch.as_tensor(rng.choice(len(x), size=cfg.batch_size, replace=False))
        loss = model(input_ids=x[idx], attention_mask=(x[idx] != tok.pad_token_id).long(), labels=y[idx]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        smooth = float(loss) if smooth is None else 0.9 * smooth + 0.1 * float(loss)
        # Competence appears abruptly once the loss breaks through its plateau: measure densely only then.
        every = cfg.calib_every if smooth < cfg.dense_below_loss else cfg.sparse_calib_every
        if step % every == 0:
            model.eval()
            rate = pass_rate(model, tok, calib, cfg.calib_samples, max_new, seed + step, pattern)
            history.append({"step": step, "loss": float(loss), "pass_rate": rate})
            log.info("step %d loss %.3f calibration pass rate %.3f", step, float(loss), rate)
            if best is None or abs(rate - cfg.target_pass_rate) < abs(best[1] - cfg.target_pass_rate):
                best = (step, rate, copy.deepcopy(model.state_dict()))
            if rate >= cfg.stop_above:
                break
    if best is None:
        raise RuntimeError("max_steps is smaller than calib_every: no calibration point was measured")
    step, rate, state = best
    model.load_state_dict(state)
    summary = {"chosen_step": step, "chosen_pass_rate": rate, "n_parameters": n_params, "history": history,
               "settings": asdict(cfg)}
    _save(model, tok, Path(out_dir), summary)
    return summary


def _save(model, tokenizer, out_dir: Path, summary: dict) -> None:
    """Save atomically: write a sibling folder, then rename it into place."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out_dir) as tmp:
        tmp.unlink()
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        write_json(summary, tmp / "calibration.json")
        if out_dir.exists():
            shutil.rmtree(out_dir)
