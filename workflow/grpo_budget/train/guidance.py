"""Where a guided rollout's guidance goes, and which guided groups are kept: pure functions of prompts and grades.

``training.guidance_place``:

- ``prompt``: the guidance is privileged context in the prompt, as OC-GRPO and Guide-GRPO (arXiv 2506.13923; code
  vaskar-open-source-research/guide_rl, the ``hint`` prompt variant) place it. The prompt's text (a chat prompt's last
  user message) is put into ``training.guidance_template`` at ``{prompt}``, the guidance at ``{guidance}``; the model
  then writes its whole answer.
- ``continuation``: the guidance begins the answer (the prompt as the model sees it, chat template applied, then the
  guidance), and the rollout continues it: what this project did before.

Guide keeps a rerolled group only if its guided accuracy is neither 0 nor 1 (``hint_accuracy_lower_bound`` 0.001,
``hint_accuracy_upper_bound`` 0.999): :func:`unmixed`.
"""

from __future__ import annotations

import copy

import numpy as np

PLACES = ("prompt", "continuation")


def in_prompt(prompt, guidance: str, template: str):
    """``prompt`` (text, or chat messages) with ``guidance`` put in by ``template`` (``{prompt}`` and ``{guidance}``
    replaced verbatim, so braces elsewhere need no escaping); unchanged when there is no guidance."""
    if not guidance:
        return prompt

    def fill(text: str) -> str:
        return template.replace("{guidance}", guidance).replace("{prompt}", text)

    if isinstance(prompt, str):
        return fill(prompt)
    messages = copy.deepcopy(list(prompt))
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    messages[last]["content"] = fill(messages[last]["content"])
    return messages


def as_continuation(prompt, guidance: str, tokenizer, template_kwargs: dict | None) -> str:
    """The prompt as the model sees it (a chat prompt rendered with its generation prompt), then ``guidance``, as if
    the model had begun its answer with it."""
    if not isinstance(prompt, str):
        prompt = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False,
                                               **(template_kwargs or {}))
        return prompt + guidance
    return f"{prompt} {guidance}" if guidance else prompt


def guided_prompt(prompt, guidance: str, place: str, template: str, tokenizer=None, template_kwargs=None):
    """The prompt a guided rollout is generated from (``training.guidance_place``)."""
    if place == "prompt":
        return in_prompt(prompt, guidance, template)
    if place == "continuation":
        return as_continuation(prompt, guidance, tokenizer, template_kwargs)
    raise ValueError(f"training.guidance_place is {place!r}; allowed: {', '.join(PLACES)}")


def unmixed(correct) -> list[int]:
    """The groups (rows of ``correct``: groups by rollouts) whose rollouts all failed or all passed: no gradient, and
    Guide drops a guided group of either kind."""
    c = np.asarray(correct, dtype=float)
    return [int(i) for i in np.flatnonzero(c.min(axis=1) == c.max(axis=1))]
