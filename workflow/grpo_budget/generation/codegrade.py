"""Grading code answers: the completion's code runs with the item's tests in the sandbox
(:mod:`grpo_budget.generation.sandbox`); it is right when every test ran and passed.

A code item's gold answer is a JSON object (:func:`gold`): ``tests`` (each a snippet of asserts, run in the
code's names), ``setup`` (run before each test), ``prefix`` (put before the code: HumanEval's prompt, so its imports
and helpers are there and a completion that is only the function's body completes it) and ``entry_point`` (the
name under test). The code is the last fenced block that defines a function (else the last fenced block), or the
whole completion when it has no fence and parses as Python.
"""

from __future__ import annotations

import ast
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from grpo_budget.generation import sandbox

log = logging.getLogger(__name__)

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_CODE_LANGS = ("", "python", "python3", "py")


def gold(tests: Sequence[str], setup: str = "", prefix: str = "", entry_point: str | None = None) -> str:
    """A code item's gold answer, as the ``answer`` column holds it."""
    return json.dumps({"tests": list(tests), "setup": setup, "prefix": prefix, "entry_point": entry_point})


def parse_gold(text: str) -> dict:
    """A gold answer written by :func:`gold` (ValueError when it is not one)."""
    g = json.loads(text)
    if not isinstance(g, dict) or not isinstance(g.get("tests"), list) or not g["tests"]:
        raise ValueError("a code gold answer is a JSON object with a non-empty list of tests")
    return g


def extract_code(text: str) -> str | None:
    """The code of a completion (see the module docstring); None when it has none."""
    blocks = [body for lang, body in _FENCE.findall(text) if lang.lower() in _CODE_LANGS and body.strip()]
    if blocks:
        defining = [b for b in blocks if re.search(r"^\s*(?:async\s+)?def \w+", b, re.M)]
        return (defining or blocks)[-1]
    if "```" in text or not text.strip():
        return None
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        # a body that continues a prompt's function (a base model's completion) parses once indented under a def
        try:
            ast.parse("def _f():\n" + text)
        except (SyntaxError, ValueError):
            return None
    return text


def program(code: str, g: dict) -> str:
    """The code as it runs: after the item's prefix; a bare function body (indented) continues the prefix."""
    prefix = g.get("prefix") or ""
    if not prefix:
        return code
    return prefix + code if code[:1] in (" ", "\t") else prefix + "\n" + code


@dataclass(frozen=True)
class CodeGrade:
    code: str | None  # None: no code in the completion
    passed: int
    total: int
    reason: str | None  # why it is not a pass; None for a pass

    @property
    def correct(self) -> bool:
        return self.reason is None

    @property
    def share(self) -> float:
        return self.passed / self.total if self.total else 0.0


def grade_code_many(completions: Sequence[str], golds: Sequence[str], limits: sandbox.Limits = sandbox.Limits(),
                    threads: int | None = None) -> list[CodeGrade]:
    """Grade each completion against its gold, the runs in parallel sandboxes; each failure is logged with why."""
    jobs, slots, out = [], [], [None] * len(completions)
    for i, (text, gold_text) in enumerate(zip(completions, golds)):
        try:
            g = parse_gold(gold_text)
        except (ValueError, TypeError):
            out[i] = CodeGrade(None, 0, 0, "the gold answer is not a code item's tests")
            continue
        code = extract_code(text if isinstance(text, str) else "")
        if code is None:
            out[i] = CodeGrade(None, 0, len(g["tests"]), "no code in the completion")
            continue
        keep = (g["entry_point"],) if g.get("entry_point") else ()
        jobs.append(sandbox.Job(program(code, g), tuple(g["tests"]), g.get("setup") or "", keep, g.get("prefix") or ""))
        slots.append((i, code))
    for (i, code), o in zip(slots, sandbox.run_many(jobs, limits, threads)):
        out[i] = CodeGrade(code, o.passed, o.total, None if o.ok else o.reason)
    for i, cg in enumerate(out):
        if not cg.correct:
            log.info("code completion %d of %d scored 0 (%d of %d tests passed): %s", i + 1, len(out), cg.passed,
                     cg.total, cg.reason)
    return out


_DEFS = re.compile(r"^def (\w+)", re.M)


def perturbed(code: str) -> str:
    """A reference solution altered to be wrong: after it, each function it defines returns None instead."""
    names = sorted(set(_DEFS.findall(code)))
    stubs = "\n" + "".join(f"\ndef {n}(*args, **kwargs):\n    return None\n" for n in names)
    end = code.rfind("```")
    if end > code.find("```"):  # a fenced solution: the stubs go inside its block
        return code[:end].rstrip("\n") + stubs + code[end:]
    return code + stubs
