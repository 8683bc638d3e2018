"""Prompts: one function builds them, one tokenizes them, for every backend and for training alike.

A prompt is either plain text (base models, the embedded tiny model) or a list of chat messages
(instruct models); tokenization mirrors TRL's GRPOTrainer so that scoring, training and evaluation
see the same token ids.
"""

from __future__ import annotations

from typing import Any, Union

from grpo_budget.prepare.benchmarks import BENCHMARKS

Prompt = Union[str, list[dict[str, str]]]


def build(question: str, instruction: str = "", chat: bool = False, template: str | None = None) -> Prompt:
    """The question with the dataset's instruction appended, or put into ``template`` at ``{question}`` (every other
    character verbatim, so ``\\boxed{}`` needs no escaping); as one user message when ``chat``."""
    if template is not None:
        text = template.replace("{question}", question)
    else:
        text = f"{question}\n\n{instruction}" if instruction else question
    return [{"role": "user", "content": text}] if chat else text


def for_dataset(dataset: dict, questions: list[str], tokenizer: Any) -> list[Prompt]:
    """The prompts of a config dataset entry: its instruction (a benchmark's paper-style default when the
    config gives none) and its chat-template setting resolved for ``tokenizer``."""
    p = dataset.get("prompt", {})
    instruction = p.get("instruction")
    if instruction is None:
        instruction = default_instruction(dataset)
    chat = use_chat(tokenizer, p.get("chat_template", "auto"))
    return [build(q, instruction, chat, p.get("template")) for q in questions]


def default_instruction(dataset: dict) -> str:
    """The instruction a dataset's questions get when the config gives none: its benchmark's; for the user's own
    files, that of the first benchmark with the same answer type (an exact answer is boxed like a number)."""
    bench = BENCHMARKS.get(dataset.get("benchmark", ""))
    if bench is None and dataset.get("source") == "files":
        kind = {"exact": "number"}.get(dataset.get("answer_type"), dataset.get("answer_type"))
        bench = next((b for b in BENCHMARKS.values() if b.answer_type == kind), None)
    return bench.instruction if bench else ""


def use_chat(tokenizer: Any, setting: bool | str) -> bool:
    """Resolve the config's ``chat_template`` setting (true, false or "auto") for a tokenizer."""
    if setting == "auto":
        return getattr(tokenizer, "chat_template", None) is not None
    return bool(setting)


def tokenize(tokenizer: Any, prompt: Prompt, template_kwargs: dict | None = None) -> list[int]:
    """Token ids of a prompt exactly as TRL builds them (chat template with a generation prompt, or plain text)."""
    if isinstance(prompt, str):
        return list(tokenizer(text=prompt)["input_ids"])
    ids = tokenizer.apply_chat_template(
        prompt, add_generation_prompt=True, tokenize=True, return_dict=False, **(template_kwargs or {})
    )
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return list(ids)
