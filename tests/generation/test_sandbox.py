"""The code sandbox against adversarial completions: each scores 0 with one log line saying why, and leaves no file
and no process behind. Where this machine refuses namespaces the tests skip (CI=true: they fail)."""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import missing_data

from grpo_budget.generation import codegrade, sandbox
from grpo_budget.generation.grading import grade_many

GOLD = codegrade.gold(["assert sorted(f([3, 1, 2])) == [1, 2, 3]", "assert f([]) == []"], entry_point="f")
RIGHT = "def f(xs):\n    return sorted(xs)\n"
WRONG = "def f(xs):\n    return None\n"
FAST = sandbox.Limits(cpu_seconds=1, wall_seconds=8, memory_mb=256, output_kb=64)  # room for a busy machine


@pytest.fixture(scope="module", autouse=True)
def namespaces():
    why = sandbox.problem()
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the sandbox cannot run here: {why} (CI=true: it must)")
        pytest.skip(f"the sandbox cannot run here: {why}")


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```\n"


def ours() -> set[int]:
    """Processes whose command line names the sandbox (its unshare, shell or Python)."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return {int(line.split()[0]) for line in out.splitlines() if "sandbox-setup" in line or "sandbox.report" in line}


ADVERSARIAL = {
    "infinite loop": ("while True:\n    pass\n", "killed"),  # its CPU time, or the wall time on a busy machine
    "fork bomb": ("import os\nwhile True:\n    os.fork()\n", "blocked os.fork"),
    "memory bomb": ("x = bytearray(10**10)\n", "MemoryError"),
    "os._exit(0) before the tests": ("import os\nos._exit(0)\n", "no sentinel"),
    "sys.exit(0) before the tests": ("import sys\nsys.exit(0)\n", "SystemExit"),
    "raise SystemExit before the tests": ("raise SystemExit\n", "SystemExit"),
    "monkeypatched builtins": ("import builtins\nbuiltins.sorted = lambda xs: [1, 2, 3]\n" + WRONG, "test 0"),
    "a shadowing global": ("sorted = lambda xs: [1, 2, 3]\n" + WRONG, "test 0"),
    "printing a sentinel": ("print('done 2')\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'ok 0\\ndone 2\\n')\n"
                            "    except OSError:\n        pass\nos._exit(0)\n", "no sentinel"),
    "reporting as the harness": ("import sys\nsys.audit('sandbox.report', 'done 2')\n", "blocked sandbox.report"),
    "walking the frames": ("import sys\nf = sys._getframe()\nwhile f.f_back: f = f.f_back\n"
                           "print(f.f_locals)\nimport gc\ngc.get_objects()\n", "blocked gc.get_objects"),
    "ctypes": ("import ctypes\n", "blocked import ctypes"),
    "writing outside its directory": ("open('/escaped', 'w').write('x')\n", "OSError"),
    "reading ~/.ssh": ("print(open(os.path.expanduser('~/.ssh/id_rsa')).read())\n", "FileNotFoundError"),
    "reading the environment": ("import os\nassert os.environ['GRPO_SECRET'] == 'hunter2'\n", "KeyError"),
    "opening a socket": ("import socket\nsocket.socket().connect(('1.1.1.1', 80))\n", "blocked socket"),
    "a 100 MB print": ("print('x' * 100_000_000)\n", "output"),
    "deleting the results folder": ("import shutil\nshutil.rmtree(RESULTS)\n", "FileNotFoundError"),
    "a subprocess": ("import subprocess\nsubprocess.run(['rm', '-rf', RESULTS])\n", "blocked subprocess.Popen"),
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_an_adversarial_completion_scores_zero_says_why_and_leaves_nothing(name, tmp_path, caplog, monkeypatch):
    code, why = ADVERSARIAL[name]
    results = tmp_path / "results"
    results.mkdir()
    (results / "keep.txt").write_text("mine")
    monkeypatch.setenv("GRPO_SECRET", "hunter2")
    tmp = tempfile.gettempdir()  # /tmp, or under pytest-xdist the worker's own (tests/conftest.py)
    before = set(os.listdir(tmp)), ours()
    program = f"import os\nRESULTS = {str(results)!r}\n" + code + "\n" + RIGHT.replace("sorted(xs)", "None")
    with caplog.at_level(logging.INFO, logger="grpo_budget.generation.codegrade"):
        (cg,) = codegrade.grade_code_many([fenced(program)], [GOLD], FAST)
    assert not cg.correct and why in cg.reason, cg.reason
    lines = [r.getMessage() for r in caplog.records if "scored 0" in r.getMessage()]
    assert len(lines) == 1 and cg.reason in lines[0]
    assert (results / "keep.txt").read_text() == "mine" and not Path("/escaped").exists()
    assert set(os.listdir(tmp)) <= before[0] | {p for p in os.listdir(tmp) if p.startswith("grpo-sandbox-")}
    assert not ours() - before[1]


def test_the_right_code_passes_and_partial_credit_counts_tests():
    grades = grade_many([fenced(RIGHT), fenced("def f(xs):\n    return xs[:1]\n"), "no code here"],
                        [GOLD] * 3, "code")
    assert [g.correct for g in grades] == [True, False, False]
    assert [g.share for g in grades] == [1.0, 0.5, 0.0]
    assert grades[2].reason == "no code in the completion" and not grades[2].format_ok


def test_a_bare_function_body_continues_the_prefix():
    gold = codegrade.gold(["assert add(2, 3) == 5"], prefix="def add(a, b):\n    \"\"\"Sum.\"\"\"\n", entry_point="add")
    (g,) = grade_many(["    return a + b\n"], [gold], "code")
    assert g.correct, g.reason


def test_runs_go_in_parallel_threads():
    jobs = [sandbox.Job("import time\ntime.sleep(0.5)\n", ("pass",))] * 4
    outcomes = sandbox.run_many(jobs, FAST, threads=4)
    assert all(o.ok for o in outcomes) and max(o.seconds for o in outcomes) < 1.6


def test_the_real_data_shape_is_what_the_sandbox_expects(shared_data):
    if not (shared_data / "mbpp" / "mbpp.jsonl").exists():
        missing_data("MBPP not found in ../shared/data")
