"""Answer extraction for the graders: ``\\boxed{...}`` contents, numbers, option letters, "the answer is"
anchors and user patterns (the rules are described in :mod:`grpo_budget.generation.grading`)."""

from __future__ import annotations

import functools
import math
import re

__all__ = ["last_boxed", "parse_number", "normalize_option"]

OPTION_LETTERS = "ABCDEFG"


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


def format_number(x: float) -> str:
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def numbers_equal(a: float, b: float) -> bool:
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


def strip_wrappers(s: str) -> str:
    prev = None
    while prev != s:
        prev = s
        s = _TEXT_WRAP_RE.sub(r"\1", s)
    return s


def normalize_option(text: str | None) -> str | None:
    """``"(C)"`` / ``"C"`` / ``"(c) orange ball"`` / ``"\\text{(C)}"`` -> ``"C"``."""
    if text is None:
        return None
    s = strip_wrappers(str(text)).strip()
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
    s = strip_wrappers(seg)
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


def anchor_segments(text: str) -> list[str]:
    """Text right after each answer anchor, latest anchor first."""
    segs = []
    for m in _ANCHOR_RE.finditer(text):
        seg = text[m.end() : m.end() + 120]
        seg = seg.split("\n\n", 1)[0]
        segs.append(seg)
    segs.reverse()
    return segs


# --------------------------------------------------------------------------
# extraction per type
# --------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def compile_pattern(pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid answer pattern {pattern!r}: {exc}") from exc


def pattern_extract(text: str, pattern: str) -> str | None:
    rx = compile_pattern(pattern)
    last = None
    for m in rx.finditer(text):
        last = m
    if last is None:
        return None
    if rx.groups:
        g = last.group(1)
        return g if g is not None else None
    return last.group(0)


def extract_number(text: str, mode: str, pattern: str | None) -> tuple[float | None, str | None]:
    if pattern is not None:
        raw = pattern_extract(text, pattern)
        if raw is None:
            return None, None
        return parse_number(raw), raw
    box = last_boxed(text)
    if box is not None and box.strip():
        v = parse_number(strip_wrappers(box))
        if v is not None or mode == "strict":
            return v, box
    if mode == "strict":
        return None, box
    for seg in anchor_segments(text):
        m = _VALUE_RE.search(_clean_number_text(strip_wrappers(seg))[:60])
        if m:
            v = parse_number(m.group(0))
            if v is not None:
                return v, m.group(0).strip()
    raw = _last_number(text)
    if raw is None:
        return None, None
    return parse_number(raw, allow_fraction=False), raw


def extract_option(text: str, mode: str, pattern: str | None) -> tuple[str | None, str | None]:
    if pattern is not None:
        raw = pattern_extract(text, pattern)
        return normalize_option(raw), raw
    box = last_boxed(text)
    if box is not None and box.strip():
        letter = normalize_option(box)
        if letter is not None or mode == "strict":
            return letter, box
    if mode == "strict":
        return None, box
    for seg in anchor_segments(text):
        letter = _option_in_segment(seg)
        if letter is not None:
            return letter, f"({letter})"
    letter = _last_option(text)
    return letter, (f"({letter})" if letter else None)
