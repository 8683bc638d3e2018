"""Writing tables: the shared formatting, and the CSV (per seed), Markdown and HTML (per arm) files of each table."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from grpo_budget.aggregate.read import arm_label
from grpo_budget.io import atomic_path, write_text
from grpo_budget.power import POWER


def formatted(x: float, fmt: str) -> str:
    return "–" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, fmt)


def pct(x: float) -> str:
    return formatted(100 * x if x is not None else x, ".1f")


def mean_sd(mean: float, sd: float, n: int, fmt: str = "+.1f", scale: float = 1.0) -> str:
    out = formatted(scale * mean, fmt)
    return out + (f" ± {formatted(scale * sd, '.1f')}" if n > 1 and np.isfinite(sd) else "")


def interval_text(lo: float, hi: float, fmt: str = "+.1f", scale: float = 1.0) -> str:
    return f"[{formatted(scale * lo, fmt)}, {formatted(scale * hi, fmt)}]"


def seeds_text(needed: float, seeds_a: int, seeds_b: int) -> str:
    """A verdict row's ``seeds_needed`` in words; empty when there is nothing to say (a decided pair)."""
    if np.isfinite(needed):
        return f"{int(needed)} seeds per arm for {POWER:.0%} power"
    if needed == np.inf:
        return "more test items needed"
    return "≥ 2 seeds per arm to estimate" if min(seeds_a, seeds_b) < 2 else ""


def pair_columns(g: pd.DataFrame, a: str, b: str, level: float, seeds_to_decide: bool = False) -> dict:
    """A pairwise table's display columns: A and B (columns ``a`` and ``b`` of ``g``), seeds, accuracies, A − B with
    its interval and the verdict (then the seeds to decide an undecided pair, with ``seeds_to_decide``)."""
    cols = {
        "A": g[a], "B": g[b], "seeds": [f"{x}/{y}" for x, y in zip(g["seeds_a"], g["seeds_b"])],
        "A %": g["acc_a"].map(pct), "B %": g["acc_b"].map(pct),
        "A − B (pts)": g["diff_pts"].map(lambda x: formatted(x, "+.1f")),
        f"{level:.0%} interval": [interval_text(lo, hi) for lo, hi in zip(g["diff_lo"], g["diff_hi"])],
        "verdict": g["verdict"],
    }
    if seeds_to_decide:
        cols["seeds to decide"] = [seeds_text(n, x, y) or "–"
                                   for n, x, y in zip(g["seeds_needed"], g["seeds_a"], g["seeds_b"])]
    return cols


def _markdown_table(df: pd.DataFrame) -> list[str]:
    def cell(v) -> str:
        return str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return lines


def groups_of(df: pd.DataFrame, by: Sequence[str]):
    if df.empty:
        return []
    return list(df.groupby(list(by), sort=False))


ANSWER_START, ANSWER_END = "<!-- answer -->", "<!-- /answer -->"  # around the lead paragraphs in Markdown


def inline_html(text: str) -> str:
    """One paragraph of the tables' Markdown as HTML: escaped, with ``**bold**`` and ```code``` rendered."""
    out = html.escape(text, quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def read_answer(md_path: str) -> list[str]:
    """The lead paragraphs (the answer) of a table's Markdown file written with ``lead``; empty without them."""
    text = open(md_path, encoding="utf-8").read()
    if ANSWER_START not in text or ANSWER_END not in text:
        return []
    inside = text.split(ANSWER_START, 1)[1].split(ANSWER_END, 1)[0]
    return [p.strip() for p in inside.split("\n\n") if p.strip()]


def write_outputs(outs: Sequence[str], per_seed: pd.DataFrame, title: str, note: str,
                   sections: list[tuple[str, pd.DataFrame, list[str]]], lead: Sequence[str] = ()) -> None:
    """CSV (``per_seed``, full precision), Markdown and HTML (the display ``sections``: heading, frame, notes);
    ``lead``: paragraphs before the note (the answer), marked in the Markdown so that :func:`read_answer` finds
    them."""
    csv_out, md_out, html_out = (list(outs) + [None, None])[:3]
    if csv_out:
        with atomic_path(csv_out) as tmp:
            per_seed.to_csv(tmp, index=False)
    lines = [f"# {title}", ""]
    parts = [f"<h1>{html.escape(title)}</h1>"]
    if lead:
        lines += [ANSWER_START, "", *[x for p in lead for x in (p, "")], ANSWER_END, ""]
        parts += ["<div class='answer'>", *[f"<p>{inline_html(p)}</p>" for p in lead], "</div>"]
    lines += [note, ""]
    parts.append(f"<p class='note'>{inline_html(note)}</p>")
    if not sections:
        lines += ["(nothing to show)", ""]
        parts.append("<p>(nothing to show)</p>")
    for heading, frame, notes in sections:
        lines += [f"## {heading}", "", *_markdown_table(frame), ""] + [f"{n}  " for n in notes] + ([""] if notes else [])
        parts += [f"<h2>{html.escape(heading)}</h2>", frame.to_html(index=False, escape=True, border=0)]
        parts += [f"<p>{inline_html(n)}</p>" for n in notes]
    if md_out:
        write_text("\n".join(lines).rstrip() + "\n", md_out)
    if html_out:
        style = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin-bottom:1em}"
                 "th,td{padding:3px 9px;border-bottom:1px solid #ddd;text-align:right}th{background:#f4f4f4}"
                 ".answer{font-size:1.1em;border-left:4px solid #1f77b4;padding-left:0.8em}.note{color:#444}")
        write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                   f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n", html_out)


def section_heading(key: tuple) -> str:
    model, dataset, evalset = key
    where = "in distribution" if evalset == dataset else "out of distribution"
    return f"{model} · trained on {dataset} · tested on {evalset} ({where})"


def with_variant(disp: pd.DataFrame, g: pd.DataFrame, after: str = "budget") -> pd.DataFrame:
    """A display frame with the arms' sweep variant after column ``after`` (where the table has variants)."""
    if "variant" not in g:
        return disp
    disp = disp.copy()
    disp.insert(list(disp.columns).index(after) + 1, "variant", g["variant"].to_numpy())
    return disp


def row_label(row) -> str:
    return arm_label(row["policy"], row["budget"], row.get("variant", ""))
