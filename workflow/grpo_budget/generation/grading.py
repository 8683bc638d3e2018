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
"""

from __future__ import annotations

import functools
import math
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

__all__ = [
    "ANSWER_TYPES",
    "MODES",
    "Grade",
    "grade",
    "grade_many",
    "make_reward_function",
    "last_boxed",
    "parse_number",
    "normalize_option",
]

ANSWER_TYPES = ("number", "option", "math")
MODES = ("strict", "lenient", "paper")

#: Seconds math-verify may spend parsing / comparing one answer (signal based,
#: only enforced in the main thread).
MATH_TIMEOUT_S = 5
#: Longest text handed to math-verify: longer boxed answers are format failures;
#: without a box (lenient) only the last MAX_MATH_CHARS characters are read.
MAX_MATH_CHARS = 4000

OPTION_LETTERS = "ABCDEFG"


@dataclass(frozen=True)
class Grade:
    correct: bool
    format_ok: bool  # an answer could be extracted at all
    extracted: str | None


_FAIL = Grade(correct=False, format_ok=False, extracted=None)


# --------------------------------------------------------------------------
# \boxed{...} extraction
# --------------------------------------------------------------------------

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\b")


def _boxes(text: str) -> list[tuple[int, str | None]]:
    """All ``\\boxed`` occurrences as (start, content); content None = unclosed."""
    out: list[tuple[int, str | None]] = []
    for m in _BOX_RE.finditer(text):
        i = m.end()
        n = len(text)
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] == "{":
            depth = 0
            j = i
            content = None
            while j < n:
                c = text[j]
                if c == "\\":  # skip escaped characters such as \{ \}
                    j += 2
                    continue
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0:
                        content = text[i + 1 : j]
                        break
                j += 1
            out.append((m.start(), content))
        else:
            # "\boxed 5" (TeX allows a single token argument)
            mm = re.match(r"\s*([^\s$\\{}]+)", text[i:])
            out.append((m.start(), mm.group(1) if mm and i > m.end() else None))
    return out


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (nested braces handled).

    Returns None when there is no box or the last box is unclosed; "" for an
    empty box.
    """
    boxes = _boxes(text)
    if not boxes:
        return None
    return boxes[-1][1]


# --------------------------------------------------------------------------
# numbers
# --------------------------------------------------------------------------

_NUM = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
_SIGN = r"(?:(?<![\w)\]}.])-\s?)?"
_NUM_RE = re.compile(_SIGN + _NUM)
_VALUE_RE = re.compile(
    r"(?P<sign>(?<![\w)\]}.])-\s*)?(?:"
    r"\\[dt]?frac\s*\{\s*(?P<fn>" + _NUM + r")\s*\}\s*\{\s*(?P<fd>" + _NUM + r")\s*\}"
    r"|\\[dt]?frac(?P<fn2>\d)(?P<fd2>\d)"
    r"|(?P<n>" + _NUM + r")(?:\s*/\s*(?P<d>" + _NUM + r")(?![\d.]))?"
    r")"
)
_THOUSANDS_LATEX = re.compile(r"(?<=\d)(?:\{,\}|\\[,!; ]|,\\!|\\ ,)(?=\d{3})")


def _clean_number_text(s: str) -> str:
    s = s.replace("\u2212", "-").replace("\u2013", "-").replace("\u2014", "-")
    s = _THOUSANDS_LATEX.sub(",", s)
    s = s.replace("\\$", "$").replace("\\%", "%")
    return s


def _to_float(num: str) -> float:
    return float(num.replace(",", ""))


def parse_number(text: str, *, allow_fraction: bool = True) -> float | None:
    """The first number of ``text`` as a float (None if there is none).

    Understands ``1,000``, ``$18``, ``18 dollars``, ``5 cm``, ``50%``, ``-3``,
    ``7.0``, ``\\frac{3}{4}`` and ``3/4``; when the text contains ``=`` only the
    part after the last ``=`` is read (``x = 5`` gives 5).
    """
    try:
        s = _clean_number_text(text)
        if "=" in s:
            s = s.rsplit("=", 1)[1]
        if allow_fraction:
            m = _VALUE_RE.search(s)
            if not m:
                return None
            sign = -1.0 if m.group("sign") else 1.0
            if m.group("fn") is not None:
                num, den = _to_float(m.group("fn")), _to_float(m.group("fd"))
            elif m.group("fn2") is not None:
                num, den = float(m.group("fn2")), float(m.group("fd2"))
            else:
                num = _to_float(m.group("n"))
                den = _to_float(m.group("d")) if m.group("d") else 1.0
            if den == 0:
                return None
            value = sign * num / den
        else:
            m = _NUM_RE.search(s)
            if not m:
                return None
            value = _to_float(m.group(0).replace(" ", ""))
        if math.isnan(value) or math.isinf(value):
            return None
        return value
    except (ValueError, OverflowError, ZeroDivisionError):
        return None


def _last_number(text: str) -> str | None:
    s = _clean_number_text(text)
    last = None
    for m in _NUM_RE.finditer(s):
        last = m.group(0)
    return last.replace(" ", "") if last is not None else None


def _format_number(x: float) -> str:
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def _numbers_equal(a: float, b: float) -> bool:
    # Integers compare exactly (a relative tolerance would accept 192000004 for
    # 192000000); decimals within 1e-6 relative (0.333333 vs 1/3 style answers).
    if a == int(a) and b == int(b):
        return a == b
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


# --------------------------------------------------------------------------
# options
# --------------------------------------------------------------------------

_TEXT_WRAP_RE = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|emph)\s*\{([^{}]*)\}")
_OPTION_PAREN_RE = re.compile(r"\(\s*([A-Ga-g])\s*\)")
_OPTION_BARE_RE = re.compile(r"^[\s$*_{}]*\(?\s*([A-G])\s*\)?(?![\w'])")


def _strip_wrappers(s: str) -> str:
    prev = None
    while prev != s:
        prev = s
        s = _TEXT_WRAP_RE.sub(r"\1", s)
    return s


def normalize_option(text: str | None) -> str | None:
    """``"(C)"`` / ``"C"`` / ``"(c) orange ball"`` / ``"\\text{(C)}"`` -> ``"C"``."""
    if text is None:
        return None
    s = _strip_wrappers(str(text)).strip()
    s = s.strip("$ *{}").strip()
    m = re.match(r"^\(\s*([A-Ga-g])\s*\)", s)
    if m:
        return m.group(1).upper()
    m = re.match(r"^([A-Ga-g])(?:\s*\)|\s*[.:,]|\s*$)", s)
    if m and (len(s) == 1 or m.group(1).isupper()):
        return m.group(1).upper()
    m = re.match(r"^([A-G])\s+\S", s)  # "C orange ball"
    if m:
        return m.group(1)
    return None


def _option_in_segment(seg: str) -> str | None:
    """The option named right after an "answer is" / "####" anchor."""
    s = _strip_wrappers(seg)
    m = _OPTION_BARE_RE.match(s)
    if m:
        return m.group(1)
    m = _OPTION_PAREN_RE.search(s[:40])
    if m:
        return m.group(1).upper()
    return None


def _last_option(text: str) -> str | None:
    last = None
    for m in _OPTION_PAREN_RE.finditer(text):
        if m.group(1).isupper():
            last = m.group(1)
    return last


# --------------------------------------------------------------------------
# lenient anchors
# --------------------------------------------------------------------------

_ANCHOR_RE = re.compile(
    r"(?:\banswer\s*(?:(?:is|was|would\s+be|will\s+be|should\s+be)\b\s*:?|[:=])|####)",
    re.IGNORECASE,
)


def _anchor_segments(text: str) -> list[str]:
    """Text right after each answer anchor, latest anchor first."""
    segs = []
    for m in _ANCHOR_RE.finditer(text):
        seg = text[m.end() : m.end() + 120]
        seg = seg.split("\n\n", 1)[0]
        segs.append(seg)
    segs.reverse()
    return segs


# --------------------------------------------------------------------------
# math (math-verify)
# --------------------------------------------------------------------------


def _timeout() -> int | None:
    # math-verify's timeouts use signal.alarm, which only works in the main thread.
    return MATH_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


@functools.lru_cache(maxsize=1)
def _mv():
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    return parse, verify, LatexExtractionConfig, ExprExtractionConfig


def _mv_parse(text: str, boxed_only: bool) -> list:
    if not text or len(text) > MAX_MATH_CHARS:
        return []
    try:
        parse, _, Latex, Expr = _mv()
        if boxed_only:
            config = [Latex(boxed_match_priority=0)]
        else:
            config = [Latex(), Expr()]
        return parse(text, extraction_config=config, parsing_timeout=_timeout()) or []
    except BaseException as exc:  # noqa: BLE001 - math-verify may raise anything, incl. timeouts
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return []


def _mv_verify(gold: list, pred: list) -> bool:
    try:
        _, verify, _, _ = _mv()
        return bool(verify(gold, pred, timeout_seconds=_timeout()))
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return False


@functools.lru_cache(maxsize=65536)
def _parse_math_gold(gold: str) -> tuple:
    g = gold.strip()
    inner = last_boxed(g) if "\\boxed" in g else None
    if inner:
        g = inner
    if g.startswith("$") and g.endswith("$") and len(g) > 1:
        g = g.strip("$")
    parsed = _mv_parse("\\boxed{" + g + "}", boxed_only=True)
    return tuple(parsed)


_BASE_RE = re.compile(r"^\s*\$?\s*([0-9A-Za-z]+)\s*_\s*\{?\s*(\d+)\s*\}?\s*\$?\s*$")


def _base_notation(s: str) -> tuple[str, str] | None:
    m = _BASE_RE.match(s)
    return (m.group(1).upper(), m.group(2)) if m else None


def _tiny_numbers_differ(gold_parsed: list, pred: list) -> bool:
    """math-verify rounds to 6 decimals, so 2^-98 "equals" 2^-93; compare such values exactly."""
    try:
        a, b = gold_parsed[0], pred[0]
        if not (getattr(a, "is_number", False) and getattr(b, "is_number", False)):
            return False
        fa, fb = complex(a.evalf(30)), complex(b.evalf(30))
        scale = max(abs(fa), abs(fb))
        if scale == 0 or scale >= 1e-3:
            return False
        return abs(fa - fb) > 1e-6 * scale
    except Exception:  # noqa: BLE001
        return False


def _grade_math(extracted: str, gold: str, boxed: bool) -> Grade:
    pred = _mv_parse("\\boxed{" + extracted + "}" if boxed else extracted, boxed_only=boxed)
    if not pred:
        return Grade(False, False, extracted if boxed else None)
    shown = extracted if boxed else str(pred[-1])
    gold_parsed = list(_parse_math_gold(str(gold)))
    if not gold_parsed:
        return Grade(False, True, shown)
    correct = _mv_verify(gold_parsed, pred)
    if correct:
        # Guards for two known math-verify blind spots (it only ever tightens):
        # base subscripts are dropped ("2215_6" == "2215_7"), tiny numbers round to 0.
        gb, pb = _base_notation(str(gold)), _base_notation(shown)
        if gb and pb and gb != pb:
            correct = False
        elif _tiny_numbers_differ(gold_parsed, pred):
            correct = False
    return Grade(correct, True, shown)


# --------------------------------------------------------------------------
# extraction per type
# --------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid answer pattern {pattern!r}: {exc}") from exc


def _pattern_extract(text: str, pattern: str) -> str | None:
    rx = _compile(pattern)
    last = None
    for m in rx.finditer(text):
        last = m
    if last is None:
        return None
    if rx.groups:
        g = last.group(1)
        return g if g is not None else None
    return last.group(0)


def _extract_number(text: str, mode: str, pattern: str | None) -> tuple[float | None, str | None]:
    if pattern is not None:
        raw = _pattern_extract(text, pattern)
        if raw is None:
            return None, None
        return parse_number(raw), raw
    box = last_boxed(text)
    if box is not None and box.strip():
        v = parse_number(_strip_wrappers(box))
        if v is not None or mode == "strict":
            return v, box
    if mode == "strict":
        return None, box
    for seg in _anchor_segments(text):
        m = _VALUE_RE.search(_clean_number_text(_strip_wrappers(seg))[:60])
        if m:
            v = parse_number(m.group(0))
            if v is not None:
                return v, m.group(0).strip()
    raw = _last_number(text)
    if raw is None:
        return None, None
    return parse_number(raw, allow_fraction=False), raw


def _extract_option(text: str, mode: str, pattern: str | None) -> tuple[str | None, str | None]:
    if pattern is not None:
        raw = _pattern_extract(text, pattern)
        return normalize_option(raw), raw
    box = last_boxed(text)
    if box is not None and box.strip():
        letter = normalize_option(box)
        if letter is not None or mode == "strict":
            return letter, box
    if mode == "strict":
        return None, box
    for seg in _anchor_segments(text):
        letter = _option_in_segment(seg)
        if letter is not None:
            return letter, f"({letter})"
    letter = _last_option(text)
    return letter, (f"({letter})" if letter else None)


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
    return f"({g})" if re.fullmatch(r"[A-Z]", g) else g  # as loaders.py writes BBH targets


def _grade_paper(text: str, gold_s: str, answer_type: str, pattern: str | None) -> Grade:
    raw = _pattern_extract(text, pattern) if pattern is not None else _paper_last_box(text)
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
        value, raw = _extract_number(text, mode, pattern)
        if value is None:
            return Grade(False, False, raw)
        g = parse_number(gold_s)
        correct = g is not None and _numbers_equal(value, g)
        return Grade(correct, True, _format_number(value))
    if answer_type == "option":
        letter, raw = _extract_option(text, mode, pattern)
        if letter is None:
            return Grade(False, False, raw)
        g = normalize_option(gold_s)
        return Grade(g is not None and letter == g, True, f"({letter})")
    # math
    if pattern is not None:
        raw = _pattern_extract(text, pattern)
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
        _compile(pattern)


def grade(
    completion: str,
    gold: str,
    answer_type: str,
    mode: str = "lenient",
    pattern: str | None = None,
) -> Grade:
    """Grade one completion against one gold answer (never raises on text)."""
    _check_args(answer_type, mode, pattern)
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
    return [grade(c, g, answer_type, mode, pattern) for c, g in zip(completions, golds)]


def _completion_text(c: Any) -> str:
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
        return "\n".join(_completion_text(m) for m in chosen)
    return "" if c is None else str(c)


def make_reward_function(
    answer_type: str, mode: str = "lenient", pattern: str | None = None
) -> Callable[..., list[float]]:
    """A TRL-style reward function ``f(completions, answer, **kwargs) -> list[float]``.

    1.0 for a correct completion, else 0.0.  ``answer`` is the dataset column of
    gold answers (one per completion, as TRL repeats columns per generation).
    """
    _check_args(answer_type, mode, pattern)

    def correct(completions, answer=None, **kwargs) -> list[float]:
        golds = answer if answer is not None else kwargs.get("gold")
        if golds is None:
            raise ValueError("reward function needs the gold answers as the 'answer' column")
        if isinstance(golds, str):
            golds = [golds] * len(completions)
        texts = [_completion_text(c) for c in completions]
        return [1.0 if g.correct else 0.0 for g in grade_many(texts, list(golds), answer_type, mode, pattern)]

    correct.__name__ = "correct"
    correct.__qualname__ = "correct"
    return correct
