"""Tests of the project's one grading interface (grpo_budget.generation.grading)."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_budget.generation.extract import last_boxed, normalize_option, parse_number
from grpo_budget.generation.grading import (
    ANSWER_TYPES,
    Grade,
    grade,
    grade_many,
    make_reward_function,
)


def ok(completion, gold, answer_type, mode="lenient", pattern=None):
    return grade(completion, gold, answer_type, mode=mode, pattern=pattern).correct


# --------------------------------------------------------------------------- boxes


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"\boxed{5}", "5"),
        (r"a \boxed{1} b \boxed{2}", "2"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{\left\{ 1, 2 \right\}}", r"\left\{ 1, 2 \right\}"),
        (r"\boxed{a{b{c}}d}", "a{b{c}}d"),
        (r"\boxed{}", ""),
        (r"\boxed {7}", "7"),
        (r"\boxed 7", "7"),
        (r"\fbox{3}", "3"),
        ("no box", None),
        (r"\boxed{12", None),  # unclosed (truncated) box
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


# --------------------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    "completion, gold",
    [
        (r"\boxed{72}", "72"),
        (r"\boxed{1,000}", "1000"),
        (r"\boxed{1000}", "1,000"),
        (r"\boxed{1{,}000}", "1000"),
        (r"\boxed{1\,000}", "1000"),
        (r"\boxed{\$18}", "18"),
        (r"\boxed{18 \text{ dollars}}", "18"),
        (r"\boxed{18 dollars}", "18"),
        (r"\boxed{5 cm}", "5"),
        (r"\boxed{5 \text{ cm}^2}", "5"),
        (r"\boxed{50\%}", "50"),
        (r"\boxed{7.0}", "7"),
        (r"\boxed{7.00}", "7"),
        (r"\boxed{-3}", "-3"),
        (r"\boxed{−3}", "-3"),  # unicode minus
        (r"\boxed{0.5}", "0.5"),
        (r"\boxed{\frac{1}{2}}", "0.5"),
        (r"\boxed{\dfrac{3}{4}}", "0.75"),
        (r"\boxed{-\frac{3}{4}}", "-0.75"),
        (r"\boxed{x = 12}", "12"),
        (r"First \boxed{3}, then corrected: \boxed{4}", "4"),
        ("The answer is 42.", "42"),
        ("The answer is: $1,234.", "1234"),
        ("Answer: -7", "-7"),
        ("She has 5 apples.\n#### 1,000", "1000"),
        ("5 + 3 = 8 so 8 apples remain", "8"),
        ("so 0.333333 is it", "0.3333333"),  # within 1e-6 relative
    ],
)
def test_number_correct(completion, gold):
    g = grade(completion, gold, "number")
    assert g.correct, g
    assert g.format_ok


@pytest.mark.parametrize(
    "completion, gold",
    [
        (r"\boxed{71}", "72"),
        (r"\boxed{3}", "-3"),
        (r"\boxed{100}", "1000"),
        (r"\boxed{0.33}", "0.3333333"),
        (r"\boxed{192000004}", "192000000"),  # integers compare exactly
        (r"\boxed{72} no wait \boxed{73}", "72"),  # last box wins
        ("The answer is 41. Check: 42 apples.", "41.5"),
    ],
)
def test_number_wrong(completion, gold):
    g = grade(completion, gold, "number")
    assert not g.correct


def test_number_strict_requires_last_box():
    assert ok(r"\boxed{9}", "9", "number", mode="strict")
    assert not ok("The answer is 9", "9", "number", mode="strict")
    g = grade("The answer is 9", "9", "number", mode="strict")
    assert not g.format_ok and g.extracted is None
    # empty box = format failure, counted apart from a wrong answer
    g = grade(r"it is 9 \boxed{}", "9", "number", mode="strict")
    assert (g.correct, g.format_ok) == (False, False)
    # the earlier box does not count in strict mode when the last one is empty
    assert not ok(r"\boxed{9} \boxed{}", "9", "number", mode="strict")
    # unclosed box
    assert not grade(r"\boxed{9", "9", "number", mode="strict").format_ok


def test_number_lenient_fallbacks():
    assert ok(r"it is 9 \boxed{}", "9", "number")  # empty box -> fall back
    assert ok("#### 9", "9", "number")
    assert ok("The final answer is 9 apples.", "9", "number")
    assert ok("blah blah 3 then 9", "9", "number")  # last number
    g = grade("no digits at all", "9", "number")
    assert (g.correct, g.format_ok) == (False, False)
    g = grade("The answer is 8", "9", "number")
    assert (g.correct, g.format_ok, g.extracted) == (False, True, "8")


def test_parse_number():
    assert parse_number("1,000") == 1000
    assert parse_number("$1,234.50") == 1234.5
    assert parse_number("-12") == -12
    assert parse_number("3/4") == 0.75
    assert parse_number(r"\frac12") == 0.5
    assert parse_number("x") is None
    assert parse_number("1/0") is None


def test_pattern_overrides_extraction():
    pattern = r"=\s*(-?\d+)"
    assert ok("7 0 5 4 = 4", "4", "number", pattern=pattern)
    assert ok("3 1 = 2 ... 7 0 5 4 = 4", "4", "number", pattern=pattern)  # last match
    assert not ok(r"7 0 5 4 = 5 \boxed{4}", "4", "number", pattern=pattern)
    g = grade("7 0 5 4", "4", "number", pattern=pattern)
    assert (g.correct, g.format_ok) == (False, False)
    assert ok("got 3 then 12", "12", "number", pattern=r"\d+")  # no group: whole last match
    assert ok("result: <C>", "(C)", "option", pattern=r"<([A-G])>")
    with pytest.raises(ValueError):
        grade("x", "1", "number", pattern="(unclosed")


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    "completion",
    [
        r"So the answer is \boxed{(C)}.",
        r"\boxed{C}",
        r"\boxed{\text{(C)}}",
        r"\boxed{(C) orange ball}",
        r"\boxed{\textbf{C}}",
        r"Bob has the pink ball, option (A)... \boxed{(C)}",
        "So the answer is (C).",
        "The answer is C.",
        "Answer: (C) pink ball",
        "At the end Bob has the pink ball (C).",
    ],
)
def test_option_correct(completion):
    assert ok(completion, "(C)", "option"), grade(completion, "(C)", "option")


@pytest.mark.parametrize(
    "completion",
    [
        r"\boxed{(B)}",
        r"\boxed{(C)} wait \boxed{(D)}",
        "So the answer is (A).",
        "The answer is Alice (B)",
    ],
)
def test_option_wrong(completion):
    g = grade(completion, "(C)", "option")
    assert g.format_ok and not g.correct, g


def test_option_strict_and_format_failures():
    assert ok(r"\boxed{(C)}", "(C)", "option", mode="strict")
    assert ok(r"\boxed{C}", "C", "option", mode="strict")
    g = grade("So the answer is (C).", "(C)", "option", mode="strict")
    assert (g.correct, g.format_ok) == (False, False)
    g = grade(r"\boxed{pink ball}", "(C)", "option", mode="strict")
    assert not g.format_ok
    g = grade("Alice, Bob and Eve swap.", "(C)", "option")  # no option named
    assert not g.format_ok


def test_normalize_option():
    assert normalize_option("(C)") == "C"
    assert normalize_option(" c ") == "C"
    assert normalize_option(r"\text{(G)}") == "G"
    assert normalize_option("Alice") is None
    assert normalize_option("(H)") is None


# --------------------------------------------------------------------------- math


@pytest.mark.parametrize(
    "completion, gold",
    [
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{\dfrac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{0.5}", r"\frac12"),
        (r"\boxed{\frac12}", "0.5"),
        (r"\boxed{-\frac{3}{4}}", r"-\dfrac{3}{4}"),
        (r"\boxed{\frac{\sqrt{3}}{2}}", r"\frac{\sqrt3}{2}"),
        (r"\boxed{8+4i}", "8+4i"),
        (r"\boxed{(-\infty, 3]}", r"(-\infty,3]"),
        (r"\boxed{10,\!000}", "10000"),
        (r"The value is $\boxed{x^2+2x+1}$.", "(x+1)^2"),
        (r"first \boxed{1} then \boxed{\pi}", r"\pi"),  # last box wins
        (r"\boxed{\text{(C)}}", r"\text{(C)}"),
        ("The final answer is $3$.", "3"),  # lenient, no box
        (r"\boxed{\boxed{5}}", "5"),
    ],
)
def test_math_correct(completion, gold):
    g = grade(completion, gold, "math")
    assert g.correct, g


@pytest.mark.parametrize(
    "completion, gold",
    [
        (r"\boxed{\frac{1}{3}}", r"\frac{1}{2}"),
        (r"\boxed{\pi} then \boxed{1}", r"\pi"),
        (r"\boxed{-\frac{3}{4}}", r"\frac{3}{4}"),
        (r"\boxed{(-\infty, 3)}", r"(-\infty,3]"),
    ],
)
def test_math_wrong(completion, gold):
    g = grade(completion, gold, "math")
    assert g.format_ok and not g.correct, g


def test_math_strict_and_empty_box():
    assert ok(r"\boxed{\frac{1}{2}}", "0.5", "math", mode="strict")
    g = grade("The final answer is $3$.", "3", "math", mode="strict")
    assert (g.correct, g.format_ok) == (False, False)
    g = grade(r"so \boxed{}", "3", "math", mode="strict")
    assert (g.correct, g.format_ok) == (False, False)
    g = grade("no math here whatsoever", "3", "math")
    assert not g.correct


def test_math_lenient_reads_the_end_of_long_unboxed_text():
    text = "Let me think. " * 1000 + "The final answer is $\\frac{1}{2}$."
    assert ok(text, "0.5", "math")


def test_math_works_outside_main_thread():
    out = {}

    def run():
        out["g"] = grade(r"\boxed{\dfrac{1}{2}}", "0.5", "math")

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert out["g"].correct


def test_math_odd_input_returns_quickly(monkeypatch):
    import time

    import grpo_budget.generation.mathgrade as mathgrade

    monkeypatch.setattr(mathgrade, "MATH_TIMEOUT_S", 1)  # math-verify's timeouts must take effect

    nasty = [
        r"\boxed{" + "{" * 300 + "}" * 300 + "}",
        r"\boxed{" + r"\frac{1}{" * 50 + "2" + "}" * 50 + "}",
        r"\boxed{10^{10^{10^{10}}}}",
        r"\boxed{\left( \right.}",
        r"\boxed{" + "x" * 10000 + "}",
        "$" * 500,
    ]
    t0 = time.time()
    for text in nasty:
        g = grade(text, "1", "math")
        assert isinstance(g, Grade) and not g.correct
    assert time.time() - t0 < 15


# --------------------------------------------------------------------------- API


def test_grade_many_and_validation():
    gs = grade_many([r"\boxed{1}", r"\boxed{2}", "none"], ["1", "1", "1"], "number", mode="strict")
    assert [g.correct for g in gs] == [True, False, False]
    assert [g.format_ok for g in gs] == [True, True, False]
    with pytest.raises(ValueError):
        grade_many(["a"], ["1", "2"], "number")
    with pytest.raises(ValueError):
        grade("x", "1", "date")
    with pytest.raises(ValueError):
        grade("x", "1", "number", mode="loose")


def test_reward_function_trl_style():
    f = make_reward_function("option")
    assert f.__name__ == "correct"
    completions = [
        [{"role": "assistant", "content": r"thinking... \boxed{(B)}"}],
        r"\boxed{(A)}",
        [{"role": "assistant", "content": ""}],
    ]
    assert f(completions, answer=["(B)", "(B)", "(B)"], prompts=["p"] * 3) == [1.0, 0.0, 0.0]
    toy = make_reward_function("number", pattern=r"=\s*(-?\d+)")
    assert toy(["7 0 5 4 = 4", "7 0 5 4 = 5"], ["4", "4"]) == [1.0, 0.0]


# --------------------------------------------------------------------------- paper mode
# Paper 1 (Pikus et al. 2025, Pikus16/grpo_difficulty): last match of r'\\boxed\{(.*?)\}',
# then int(content) == gold (GSM8K) or content == gold (BBH), applied here to the completion alone.


def paper(completion, gold, answer_type):
    return grade(completion, gold, answer_type, mode="paper")


@pytest.mark.parametrize(
    "completion, gold, correct, format_ok",
    [
        (r"\boxed{18}", "18", True, True),
        (r"So she makes \boxed{18} dollars.", "18", True, True),
        (r"\boxed{ 18 }", "18", True, True),  # int(" 18 ") == 18: int() itself strips whitespace
        (r"\boxed{-3}", "-3", True, True),
        (r"\boxed{17}", "18", False, True),  # a wrong integer is a wrong answer, not a format failure
        (r"\boxed{\$18}", "18", False, False),  # int() fails
        (r"\boxed{$18}", "18", False, False),
        (r"\boxed{18.0}", "18", False, False),
        (r"\boxed{1,000}", "1000", False, False),
        (r"\boxed{18 dollars}", "18", False, False),
        (r"\boxed{\text{18}}", "18", False, False),  # the regex stops at the first "}": "\text{18"
        (r"\boxed{}", "18", False, False),
        ("The answer is 18.", "18", False, False),  # no box: wrong and a format failure
        ("#### 18", "18", False, False),
        ("", "18", False, False),
        (r"\boxed{1000}", "1,000", True, True),  # gold read like the paper's: commas removed, int()
    ],
)
def test_paper_number(completion, gold, correct, format_ok):
    g = paper(completion, gold, "number")
    assert (g.correct, g.format_ok) == (correct, format_ok), g


def test_paper_number_last_box_wins():
    assert paper(r"first \boxed{17}, no wait: \boxed{18}", "18", "number").correct
    assert not paper(r"first \boxed{18}, no wait: \boxed{17}", "18", "number").correct
    # the last box decides even when only an earlier one is readable
    g = paper(r"\boxed{18} so the total is \boxed{\$18}", "18", "number")
    assert (g.correct, g.format_ok) == (False, False)
    # paper's regex: an unclosed last box is no match, so the earlier closed box counts
    assert paper(r"\boxed{18} and then \boxed{19", "18", "number").correct
    # and \fbox is not a box for it
    assert not paper(r"\fbox{18}", "18", "number").format_ok


def test_paper_differs_from_strict():
    assert ok(r"\boxed{\$18}", "18", "number", mode="strict")
    assert not ok(r"\boxed{\$18}", "18", "number", mode="paper")
    assert ok(r"\boxed{18.0}", "18", "number", mode="strict")
    assert not ok(r"\boxed{18.0}", "18", "number", mode="paper")
    assert ok(r"\boxed{G}", "(G)", "option", mode="strict")
    assert not ok(r"\boxed{G}", "(G)", "option", mode="paper")


@pytest.mark.parametrize(
    "completion, correct, format_ok",
    [
        (r"So the answer is \boxed{(G)}.", True, True),
        (r"Option \boxed{(A)} looked right, but \boxed{(G)}", True, True),  # last box wins
        (r"\boxed{(G)} hmm, actually \boxed{(A)}", False, True),
        (r"\boxed{(B)}", False, True),
        (r"\boxed{G}", False, False),
        (r"\boxed{\text{(G)}}", False, False),
        (r"\boxed{ (G) }", False, False),  # no stripping for options
        (r"\boxed{(G) pink ball}", False, False),
        (r"\boxed{(g)}", False, False),
        ("So the answer is (G).", False, False),  # no box
        ("", False, False),
    ],
)
def test_paper_option(completion, correct, format_ok):
    g = paper(completion, "(G)", "option")
    assert (g.correct, g.format_ok) == (correct, format_ok), g


def test_paper_option_reads_the_completion_alone():
    # Paper 1's evaluation ran its regex over prompt+completion, where the prompt's
    # example "\boxed{(A)}" could stand in for a boxless completion; we do not.
    g = paper("Bob ends with the ball (A).", "(A)", "option")
    assert (g.correct, g.format_ok) == (False, False)


def test_paper_math_is_strict():
    for text, gold in [
        (r"\boxed{\frac{1}{2}}", "0.5"),
        (r"\boxed{\dfrac{3}{4}}", r"\frac34"),
        ("The final answer is $3$.", "3"),
        (r"so \boxed{}", "3"),
        (r"\boxed{\pi} then \boxed{1}", r"\pi"),
    ]:
        assert grade(text, gold, "math", mode="paper") == grade(text, gold, "math", mode="strict")


def test_paper_reward_function_uses_the_same_rule():
    numbers = [r"\boxed{18}", r"\boxed{ 18 }", r"\boxed{\$18}", r"\boxed{18.0}", r"\boxed{17} \boxed{18}",
               r"\boxed{18} \boxed{17}", "The answer is 18."]
    golds = ["18"] * len(numbers)
    f = make_reward_function("number", mode="paper")
    expected = [1.0 if g.correct else 0.0 for g in grade_many(numbers, golds, "number", mode="paper")]
    assert expected == [1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert f(numbers, answer=golds) == expected
    assert f([[{"role": "assistant", "content": c}] for c in numbers], answer=golds) == expected

    options = [r"\boxed{(G)}", r"\boxed{G}", r"\boxed{\text{(G)}}", r"\boxed{(A)} \boxed{(G)}", "(G)"]
    f = make_reward_function("option", mode="paper")
    assert f(options, answer=["(G)"] * len(options)) == [1.0, 0.0, 0.0, 1.0, 0.0]
    assert make_reward_function("option", mode="strict")(options, answer=["(G)"] * 5) == [1.0, 1.0, 1.0, 1.0, 0.0]


def test_paper_pattern_override():
    # the user pattern replaces the box regex; the paper's comparison still applies
    assert ok("7 0 5 4 = 4", "4", "number", mode="paper", pattern=r"=\s*(\S+)")
    assert not ok("7 0 5 4 = 4.0", "4", "number", mode="paper", pattern=r"=\s*(\S+)")


# --------------------------------------------------------------------------- property


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.one_of(
        st.text(max_size=300),
        st.lists(
            st.sampled_from(
                ["\\boxed{", "{", "}", "\\frac", "\\dfrac", "1", "-", ",", ".", "000", "(C)", "$", "%", "=",
                 "answer is", "####", " ", "\\text{", "\\sqrt", "^", "\\left(", "\\right)", "x", "/", "\\"]
            ),
            max_size=60,
        ).map("".join),
    ),
    gold=st.sampled_from(["1", "(C)", "-2.5", r"\frac{1}{2}", "1,000", ""]),
    answer_type=st.sampled_from(ANSWER_TYPES),
    mode=st.sampled_from(["strict", "lenient", "paper"]),
)
def test_graders_never_raise(text, gold, answer_type, mode):
    g = grade(text, gold, answer_type, mode=mode)
    assert isinstance(g, Grade)
    assert isinstance(g.correct, bool) and isinstance(g.format_ok, bool)
    assert not (g.correct and not g.format_ok)
