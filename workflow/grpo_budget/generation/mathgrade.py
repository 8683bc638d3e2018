"""The math-verify side of grading ``"math"`` answers: parsing, comparison and the timeouts around them."""

from __future__ import annotations

import functools
import re
import threading

from grpo_budget.generation.extract import last_boxed

#: Seconds math-verify may spend parsing / comparing one answer (signal based,
#: only enforced in the main thread).
MATH_TIMEOUT_S = 5
#: Longest text handed to math-verify: longer boxed answers are format failures;
#: without a box (lenient) only the last MAX_MATH_CHARS characters are read.
MAX_MATH_CHARS = 4000


def _timeout() -> int | None:
    # math-verify's timeouts use signal.alarm, which only works in the main thread.
    return MATH_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


@functools.lru_cache(maxsize=1)
def _mv():
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    return parse, verify, LatexExtractionConfig, ExprExtractionConfig


def mv_parse(text: str, boxed_only: bool) -> list:
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


def mv_verify(gold: list, pred: list) -> bool:
    try:
        _, verify, _, _ = _mv()
        return bool(verify(gold, pred, timeout_seconds=_timeout()))
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return False


@functools.lru_cache(maxsize=65536)
def parse_math_gold(gold: str) -> tuple:
    g = gold.strip()
    inner = last_boxed(g) if "\\boxed" in g else None
    if inner:
        g = inner
    if g.startswith("$") and g.endswith("$") and len(g) > 1:
        g = g.strip("$")
    parsed = mv_parse("\\boxed{" + g + "}", boxed_only=True)
    return tuple(parsed)


_BASE_RE = re.compile(r"^\s*\$?\s*([0-9A-Za-z]+)\s*_\s*\{?\s*(\d+)\s*\}?\s*\$?\s*$")


def base_notation(s: str) -> tuple[str, str] | None:
    m = _BASE_RE.match(s)
    return (m.group(1).upper(), m.group(2)) if m else None


def tiny_numbers_differ(gold_parsed: list, pred: list) -> bool:
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
