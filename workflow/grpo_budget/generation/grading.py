"""The one grading interface of the project.

Every place that decides whether a completion is right (pass-rate scoring of the
training pool, the GRPO reward, evaluation, ``check-grader``) goes through
:func:`grade` / :func:`grade_many` / :func:`make_reward_function`.

Answer types
------------
``"number"``  integers and decimals, tolerant of thousands separators, ``$``,
              ``%``, units, trailing ``.0`` and negative signs; compared
              numerically (relative tolerance 1e-6).
``"option"``  a multiple-choice letter ``(A)`` .. ``(G)`` (BIG-Bench Hard).
``"math"``    LaTeX answers compared with the ``math-verify`` package.
``"choice"``  a labelled option (ARC's A-E or 1-4), its text counting in lenient mode
              (:mod:`grpo_budget.generation.choices`).
``"exact"``   a short string compared whole (:mod:`grpo_budget.generation.exactgrade`: case and spacing ignored
              in lenient mode).
``"code"``    the completion's code run with the item's tests in a sandbox; right when every test passed
              (:mod:`grpo_budget.generation.codegrade`; the modes do not apply).

Modes
-----
``"strict"``   the answer must be inside the LAST ``\\boxed{...}`` of the
               completion; no box, an empty box or an unclosed box is a format
               failure.
``"lenient"``  the last non-empty ``\\boxed{...}`` if there is one, otherwise
               "the answer is ..." / "answer: ..." / "#### ..." anchors, and
               finally the last number (number) or last ``(X)`` (option) of the
               text (math: math-verify's own un-anchored extraction).

``"paper"``    exactly the rule of paper 1 ("Hard Examples Are All You Need",
               Pikus et al. 2025, github.com/Pikus16/grpo_difficulty:
               ``extract_boxed_content`` in gsm8k/gsm8k_utils.py and
               bbeh/shuffleobj/shuffleobj_utils.py, used both by its GRPO reward
               and by its evaluation).  The answer is group 1 of the LAST match
               of the paper's regex ``\\boxed\\{(.*?)\\}`` (no brace nesting: the
               content ends at the first ``}``; ``.`` does not cross a newline;
               ``\\fbox`` and ``\\boxed {x}`` are not boxes; an unclosed last box
               is simply not a match, so an earlier closed box counts).
               number: correct iff Python ``int(content)`` succeeds and equals
               the gold as an integer.  Nothing is stripped beyond what ``int``
               itself tolerates (surrounding whitespace, a sign, ``_`` between
               digits), so ``\\boxed{ 18 }`` is right but ``\\boxed{\\$18}``,
               ``\\boxed{18.0}`` and ``\\boxed{1,000}`` are wrong.
               option: correct iff the content is exactly the gold string, e.g.
               ``(G)`` (no stripping: ``\\boxed{G}``, ``\\boxed{ (G) }`` and
               ``\\boxed{\\text{(G)}}`` are wrong).
               format_ok: the content has the only form the rule can accept
               (``int()`` parses it / it is ``(X)`` for a capital letter X); no
               box is a format failure.
               Deliberate difference: paper 1 scored its evaluations on the
               decoded prompt+completion, so a boxless completion could inherit
               the prompt's example ``\\boxed{(A)}``; here (as in its training
               reward) the rule reads the completion alone.
               math: identical to ``"strict"`` (paper 1 has no math rule).

``pattern`` (a user regex) overrides the extraction in every mode: the answer is
group 1 of its last match (the whole match when the regex has no group).  In
``"paper"`` mode the extracted text is then judged by the paper's comparison
(``int()`` / exact option string).

The graders never raise on arbitrary completion text: anything that cannot be
read gives ``Grade(correct=False, format_ok=False, extracted=None)``.  They do
raise ``ValueError`` for programming errors (unknown answer type or mode, a
pattern that is not a valid regex).

Extraction is in :mod:`grpo_budget.generation.extract`, the math-verify calls in
:mod:`grpo_budget.generation.mathgrade`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from grpo_budget.generation.extract import (
    compile_pattern,
    extract_number,
    extract_option,
    format_number,
    numbers_equal,
    pattern_extract,
    last_boxed,
    normalize_option,
    parse_number,
)
from grpo_budget.generation import choices, codegrade, exactgrade
from grpo_budget.generation.mathgrade import (
    MAX_MATH_CHARS,
    base_notation,
    mv_parse,
    mv_verify,
    parse_math_gold,
    tiny_numbers_differ,
)

__all__ = [
    "ANSWER_TYPES",
    "MODES",
    "Grade",
    "grade",
    "grade_many",
    "make_reward_function",
]

ANSWER_TYPES = ("number", "option", "math", "choice", "code", "exact")
MODES = ("strict", "lenient", "paper")


@dataclass(frozen=True)
class Grade:
    correct: bool
    format_ok: bool  # an answer could be extracted at all
    extracted: str | None
    reason: str | None = None  # code: why it is not a pass
    share: float | None = None  # code: the share of the item's tests passed


_FAIL = Grade(correct=False, format_ok=False, extracted=None)


# --------------------------------------------------------------------------
# math (math-verify)
# --------------------------------------------------------------------------


def _grade_math(extracted: str, gold: str, boxed: bool) -> Grade:
    pred = mv_parse("\\boxed{" + extracted + "}" if boxed else extracted, boxed_only=boxed)
    if not pred:
        return Grade(False, False, extracted if boxed else None)
    shown = extracted if boxed else str(pred[-1])
    gold_parsed = list(parse_math_gold(str(gold)))
    if not gold_parsed:
        return Grade(False, True, shown)
    correct = mv_verify(gold_parsed, pred)
    if correct:
        # Guards for two known math-verify blind spots (it only ever tightens):
        # base subscripts are dropped ("2215_6" == "2215_7"), tiny numbers round to 0.
        gb, pb = base_notation(str(gold)), base_notation(shown)
        if gb and pb and gb != pb:
            correct = False
        elif tiny_numbers_differ(gold_parsed, pred):
            correct = False
    return Grade(correct, True, shown)


# --------------------------------------------------------------------------
# paper mode (paper 1's rule)
# --------------------------------------------------------------------------

#: Paper 1's extraction regex, verbatim (``re.findall(r'\\boxed\{(.*?)\}', text)[-1]``).
_PAPER_BOX_RE = re.compile(r"\\boxed\{(.*?)\}")
_PAPER_OPTION_RE = re.compile(r"\([A-Z]\)")


def _paper_last_box(text: str) -> str | None:
    matches = _PAPER_BOX_RE.findall(text)
    return matches[-1] if matches else None


def _paper_int(s: str) -> int | None:
    try:
        return int(s)
    except (ValueError, TypeError):
        return None


def _paper_number_gold(gold: str) -> int | None:
    # Paper 1's gold: int() of the GSM8K "####" answer with commas removed.
    g = _paper_int(gold.strip().replace(",", ""))
    if g is not None:
        return g
    v = parse_number(gold)  # e.g. "18.0" from a CSV copy; a non-integer gold can never be matched
    return int(v) if v is not None and v == int(v) else None


def _paper_option_gold(gold: str) -> str:
    g = gold.strip()
    return f"({g})" if re.fullmatch(r"[A-Z]", g) else g  # as prepare/rows.py writes BBH targets


def _grade_paper(text: str, gold_s: str, answer_type: str, pattern: str | None) -> Grade:
    raw = pattern_extract(text, pattern) if pattern is not None else _paper_last_box(text)
    if raw is None:
        return Grade(False, False, None)
    if answer_type == "number":
        value = _paper_int(raw)
        if value is None:
            return Grade(False, False, raw)
        g = _paper_number_gold(gold_s)
        return Grade(g is not None and value == g, True, str(value))
    # option: exact string equality with the gold, as paper 1's `answer == preds`
    return Grade(raw == _paper_option_gold(gold_s), bool(_PAPER_OPTION_RE.fullmatch(raw)), raw)


def _grade(completion: Any, gold: Any, answer_type: str, mode: str, pattern: str | None) -> Grade:
    text = completion if isinstance(completion, str) else ("" if completion is None else str(completion))
    gold_s = "" if gold is None else str(gold)
    if mode == "paper":
        if answer_type in ("number", "option"):
            return _grade_paper(text, gold_s, answer_type, pattern)
        mode = "strict"  # math: paper 1 has no rule for it
    if answer_type == "number":
        value, raw = extract_number(text, mode, pattern)
        if value is None:
            return Grade(False, False, raw)
        g = parse_number(gold_s)
        correct = g is not None and numbers_equal(value, g)
        return Grade(correct, True, format_number(value))
    if answer_type == "choice":
        label, options = choices.parse_gold(gold_s)
        got, raw = choices.extract(text, options, mode, pattern)
        return Grade(got == label, got is not None, f"({got})" if got else raw)
    if answer_type == "exact":
        return Grade(*exactgrade.grade(text, gold_s, mode, pattern))
    if answer_type == "option":
        letter, raw = extract_option(text, mode, pattern)
        if letter is None:
            return Grade(False, False, raw)
        g = normalize_option(gold_s)
        return Grade(g is not None and letter == g, True, f"({letter})")
    # math
    if pattern is not None:
        raw = pattern_extract(text, pattern)
        if raw is None or not raw.strip():
            return Grade(False, False, raw)
        return _grade_math(raw.strip(), gold_s, boxed=True)
    box = last_boxed(text)
    if box is not None and box.strip():
        return _grade_math(box.strip(), gold_s, boxed=True)
    if mode == "strict":
        return Grade(False, False, box)
    # no box: let math-verify find the answer near the end of the text
    return _grade_math(text[-MAX_MATH_CHARS:], gold_s, boxed=False)


def _check_args(answer_type: str, mode: str, pattern: str | None) -> None:
    if answer_type not in ANSWER_TYPES:
        raise ValueError(f"unknown answer_type {answer_type!r}; expected one of {ANSWER_TYPES}")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    if pattern is not None:
        compile_pattern(pattern)


def grade(
    completion: str,
    gold: str,
    answer_type: str,
    mode: str = "lenient",
    pattern: str | None = None,
) -> Grade:
    """Grade one completion against one gold answer (never raises on text)."""
    _check_args(answer_type, mode, pattern)
    if answer_type == "code":
        return grade_many([completion], [gold], answer_type, mode, pattern)[0]
    try:
        return _grade(completion, gold, answer_type, mode, pattern)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception:  # noqa: BLE001 - a grader bug must not kill a training run
        return _FAIL


def grade_many(
    completions: Sequence[str],
    golds: Sequence[str],
    answer_type: str,
    mode: str = "lenient",
    pattern: str | None = None,
) -> list[Grade]:
    """Grade completions pairwise against golds (same length)."""
    _check_args(answer_type, mode, pattern)
    if len(completions) != len(golds):
        raise ValueError(f"{len(completions)} completions but {len(golds)} golds")
    if answer_type == "code":  # every completion's run in parallel sandboxes
        texts = [c if isinstance(c, str) else "" for c in completions]
        return [Grade(cg.correct, cg.code is not None, cg.code, cg.reason, cg.share)
                for cg in codegrade.grade_code_many(texts, ["" if g is None else str(g) for g in golds])]
    return [grade(c, g, answer_type, mode, pattern) for c, g in zip(completions, golds)]


def completion_text(c: Any) -> str:
    """A TRL completion (plain string or list of chat messages) as text."""
    if isinstance(c, str):
        return c
    if isinstance(c, dict):
        content = c.get("content", "")
        if isinstance(content, list):  # multimodal content parts
            return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
        return "" if content is None else str(content)
    if isinstance(c, (list, tuple)):
        msgs = [m for m in c if isinstance(m, dict)]
        assistant = [m for m in msgs if m.get("role", "assistant") == "assistant"]
        chosen = assistant or msgs
        return "\n".join(completion_text(m) for m in chosen)
    return "" if c is None else str(c)


def make_reward_function(
    answer_type: str, mode: str = "lenient", pattern: str | None = None
) -> Callable[..., list[float]]:
    """A TRL-style reward function ``f(completions, answer, **kwargs) -> list[float]``.

    1.0 for a correct completion, else 0.0.  ``answer`` is the dataset column of
    gold answers (one per completion, as TRL repeats columns per generation).
    """
    _check_args(answer_type, mode, pattern)

    def grades(completions, answer=None, **kwargs) -> list[Grade]:
        golds = answer if answer is not None else kwargs.get("gold")
        if golds is None:
            raise ValueError("reward function needs the gold answers as the 'answer' column")
        if isinstance(golds, str):
            golds = [golds] * len(completions)
        texts = [completion_text(c) for c in completions]
        return grade_many(texts, list(golds), answer_type, mode, pattern)

    def correct(completions, answer=None, **kwargs) -> list[float]:
        return [1.0 if g.correct else 0.0 for g in grades(completions, answer, **kwargs)]

    correct.__name__ = "correct"
    correct.__qualname__ = "correct"
    correct.grades = grades  # the Grade objects: grpo_budget.generation.rewards derives its rewards from them
    return correct
