"""The house rules of the package, read off its syntax trees: no import cycle (imports written inside functions
count), imports inside functions only for heavy optional dependencies and the CLI's dispatch, no module over 400
lines, and one stage folder per rule file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "workflow" / "grpo_budget"
RULES = ROOT / "workflow" / "rules"
MAX_LINES = 400
# Imported where they are used: each costs seconds or gigabytes to import, and most jobs need none of them.
HEAVY = {"torch", "transformers", "trl", "peft", "vllm", "datasets", "matplotlib", "submitit", "math_verify",
         "tokenizers", "huggingface_hub", "scipy"}
# The CLI (and the drift job's parser beside it) imports each subcommand's stage when that subcommand runs.
DISPATCH = {"grpo_budget.cli", "grpo_budget.commands", "grpo_budget.score.drift_cli"}
# The code sandbox's program, never imported by the package: where it imports is part of its security (_ctypes only
# in the checker, after the worker is forked) and of its start-up time (collections only when a result needs it).
HARNESS = {f"grpo_budget.generation.sandbox_{part}" for part in ("harness", "worker", "wire")}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The package modules an import statement loads (``from a.b import c``: ``a.b`` and ``a.b.c`` if a module)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            here = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
            parent = here[: len(here) - node.level + 1]
            base = ".".join(parent + ([node.module] if node.module else []))
        names = [base] + [f"{base}.{a.name}" for a in node.names]
    out = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module and not module.startswith(name + "."):
            out.append(name)
    return out


def import_nodes(tree: ast.AST):
    """``(node, inside_a_function)`` for every import statement of a module."""
    def walk(node, inside):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, inside
            yield from walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    yield from walk(tree, False)


def graph() -> dict[str, set[str]]:
    edges = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        edges[name] = {t for node, _ in import_nodes(tree) for t in imported(name, node)}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_counting_imports_inside_functions():
    edges = graph()
    assert sum(map(len, edges.values())) > 100  # the walk sees the package's imports at all
    assert cycles(edges) == []


def test_imports_inside_functions_are_heavy_dependencies_or_the_cli_dispatch():
    offenders = []
    for name, path in MODULES.items():
        for node, inside in import_nodes(ast.parse(path.read_text(), str(path))):
            if not inside or name in DISPATCH | HARNESS:
                continue
            top = (node.names[0].name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
            if getattr(node, "level", 0) or top not in HEAVY:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_400_lines(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name].relative_to(ROOT)}: {lines} lines"


def test_every_rule_file_has_its_stage_folder():
    stages = [p.stem for p in RULES.glob("*.smk") if p.stem != "common"]
    assert len(stages) >= 6
    for stage in stages:
        assert (PACKAGE / stage / "__init__.py").is_file(), f"workflow/rules/{stage}.smk has no grpo_budget/{stage}/"


def test_package_inits_are_empty_of_code():
    """A package's ``__init__`` holds at most a docstring, so that importing one module of a stage imports only
    what that module needs (and no cycle hides in an ``__init__``)."""
    for path in PACKAGE.rglob("__init__.py"):
        for n in ast.parse(path.read_text()).body:
            docstring = isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
            version = isinstance(n, ast.Assign) and [getattr(x, "id", None) for x in n.targets] == ["__version__"]
            assert docstring or version, f"{path.relative_to(ROOT)}:{n.lineno}"


def test_tests_mirror_the_stage_folders():
    """A stage's tests are in ``tests/STAGE/``; what spans stages (the workflow end to end, the CLI's errors, the
    registries, the docs, this file) stays at the top. Test file names are unique (pytest imports them by name)."""
    tests = ROOT / "tests"
    data = {"configs", "slurm", "__pycache__"}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name not in data}
    assert folders <= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    names = [p.name for p in tests.rglob("test_*.py")]
    assert len(names) == len(set(names))


# What the Snakefile (every snakemake command, every cluster job's own parse) and the light jobs import: each heavy
# dependency loaded here costs every one of them its import time (SciPy alone 0.6-2 s).
LIGHT = {
    "the Snakefile's imports (workflow/rules/common.smk)": [
        "grpo_budget.failures", "grpo_budget.lock", "grpo_budget.aggregate.run", "grpo_budget.cluster.cost",
        "grpo_budget.cluster.memory_plan", "grpo_budget.experiment.rules", "grpo_budget.cluster.work",
        "grpo_budget.cluster.jobs",
        "grpo_budget.experiment.config", "grpo_budget.experiment.plan", "grpo_budget.experiment.provenance",
        "grpo_budget.hub", "grpo_budget.select.policies"],
    "a prepare job": ["grpo_budget.cli", "grpo_budget.prepare.splits"],
    "a select job": ["grpo_budget.cli", "grpo_budget.experiment.plan", "grpo_budget.io", "grpo_budget.select.policies"],
    "an aggregate job": ["grpo_budget.cli", "grpo_budget.aggregate.run"],
}


@pytest.mark.parametrize("what", sorted(LIGHT))
def test_light_imports_load_no_heavy_dependency(what):
    import subprocess
    import sys

    code = (f"import importlib, sys; [importlib.import_module(m) for m in {LIGHT[what]!r}]; "
            f"print(' '.join(sorted(m for m in {sorted(HEAVY)!r} if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [], f"{what} imports {out.stdout.strip()}"
