"""The code sandbox against adversarial completions: each scores 0 with one log line saying why, and leaves no file
and no process behind; a killed grader leaves neither either. Where this machine refuses namespaces the tests skip
(CI=true: they fail)."""

from __future__ import annotations

import logging
import os
import json
import signal
import subprocess
import sys
import tempfile
import time
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


def ours(pid: int | None = None) -> set[tuple[int, str]]:
    """The live processes (and their start times) of the sandboxes of grader process ``pid`` (default: this one):
    every one carries :func:`sandbox.marker` on its command line."""
    out, mark = set(), sandbox.marker(pid).encode()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and mark in (entry / "cmdline").read_bytes():
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] != "Z":  # a zombie has ended: it only waits for its parent
                    out.add((int(entry.name), stat[19]))
        except OSError:
            pass  # it ended while we looked
    return out


ADVERSARIAL = {
    "infinite loop": ("while True:\n    pass\n", "killed"),  # its CPU time, or the wall time on a busy machine
    "fork bomb": ("import os\nwhile True:\n    os.fork()\n", "blocked os.fork"),
    "memory bomb": ("x = bytearray(10**10)\n", "MemoryError"),
    "os._exit(0) before the tests": ("import os\nos._exit(0)\n", "before the tests"),
    "sys.exit(0) before the tests": ("import sys\nsys.exit(0)\n", "SystemExit"),
    "raise SystemExit before the tests": ("raise SystemExit\n", "SystemExit"),
    "monkeypatched builtins": ("import builtins\nbuiltins.sorted = lambda xs: [1, 2, 3]\n" + WRONG, "test 0"),
    "a shadowing global": ("sorted = lambda xs: [1, 2, 3]\n" + WRONG, "test 0"),
    "printing a sentinel": ("print('done 2')\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'ok 0\\ndone 2\\n')\n"
                            "    except OSError:\n        pass\nos._exit(0)\n", "before the tests"),
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


def graded_leaving_nothing(program: str, gold: str, caplog, tmp_path, monkeypatch,
                           limits: sandbox.Limits = FAST) -> codegrade.CodeGrade:
    """``program`` graded against ``gold``, checking that it logged one line why it scored 0 and left no process,
    and no file in a temporary folder of its own."""
    own = tmp_path / "tmp"
    own.mkdir()
    monkeypatch.setenv("TMPDIR", str(own))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    before = ours()
    with caplog.at_level(logging.INFO, logger="grpo_budget.generation.codegrade"):
        (cg,) = codegrade.grade_code_many([fenced(program)], [gold], limits)
    lines = [r.getMessage() for r in caplog.records if "scored 0" in r.getMessage()]
    assert not cg.correct and len(lines) == 1 and cg.reason in lines[0], cg.reason
    assert not list(own.iterdir()) and not Path("/escaped").exists()
    assert not ours() - before
    return cg


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_an_adversarial_completion_scores_zero_says_why_and_leaves_nothing(name, tmp_path, caplog, monkeypatch):
    code, why = ADVERSARIAL[name]
    results = tmp_path / "results"
    results.mkdir()
    (results / "keep.txt").write_text("mine")
    monkeypatch.setenv("GRPO_SECRET", "hunter2")
    program = f"import os\nRESULTS = {str(results)!r}\n" + code + "\n" + RIGHT.replace("sorted(xs)", "None")
    cg = graded_leaving_nothing(program, GOLD, caplog, tmp_path, monkeypatch)
    assert why in cg.reason, cg.reason
    assert (results / "keep.txt").read_text() == "mine"


# Attacks on the verdict itself, as a policy under RL would find them (issue 53). MBPP 11's tests; every completion's
# remove_Occ is plainly wrong. Each scored 1 when the tests ran in the code's own process (the first four through
# `grpo-budget grade` on mbpp-11); here each scores 0.
GOLD11 = codegrade.gold(['assert remove_Occ("hello","l") == "heo"', 'assert remove_Occ("abcda","a") == "bcd"',
                         'assert remove_Occ("PHP","P") == "H"'], entry_point="remove_Occ")
WRONG11 = "def remove_Occ(s, ch):\n    return s\n"
EVERY_TEST_PASS = "['pass'] * len(job['tests'])"
WALK = ("    while frame is not None:\n        job = frame.f_locals.get('job')\n"  # from a frame up to the harness's job
        "        if isinstance(job, dict) and 'tests' in job:\n            job['tests'][:] = " + EVERY_TEST_PASS + "\n"
        "        frame = frame.f_back\n")
REBIND = "_e = builtins.enumerate\n{0}.enumerate = lambda xs, start=0: _e(['pass'] * len(xs), start)\n"
ANYTHING = "class Anything:\n    def __eq__(self, other):\n        return True\n\n    def __ne__(self, other):\n        return False\n"
MATH = codegrade.gold(["import math\nassert math.isclose(area(2), 12.566, rel_tol=1e-3)"], entry_point="area")
PROMPT = codegrade.gold(["def check(candidate):\n    assert poly(candidate()) == 0\n\ncheck(find_zero)"],
                        prefix='def poly(x):\n    return x * x - 4\n\n\ndef find_zero():\n    """A zero of poly."""\n',
                        entry_point="find_zero")
MAP = codegrade.gold(["assert all(map(is_prime, [2, 3, 5, 7]))", "assert not any(map(is_prime, [4, 6]))"],
                     entry_point="is_prime")
def attack(code: str, gold: str = GOLD11, why: str = "") -> tuple[str, str, str]:
    """A completion's program (MBPP 11's wrong remove_Occ added where it defines none), its gold, and what its
    reason must say."""
    return code + ("\n" + WRONG11 if gold is GOLD11 and "def remove_Occ" not in code else ""), gold, why


MAIN_AGAIN = ("import io, json, sys, __main__\nsys.addaudithook = lambda hook: None\nforged = {'rlimits': {}, 'cwd': "
              "'/work', 'nonce': 'x', 'fd': 1, 'code': '', 'tests': ['pass'] * 3, 'setup': '', 'keep': []}\n"
              "sys.stdin = type('In', (), {'buffer': io.BytesIO(json.dumps(forged).encode())})()\n__main__._main()\n")
FORK_EXEC_ARGS = ("[b'/usr/bin/sleep', b'60'], [b'/usr/bin/sleep'], True, (), None, None, -1, -1, -1, -1, -1, -1, r, w, "
                  "True, True, -1, None, None, None, -1, None, False")  # Python 3.11's: a detached `sleep 60`
VERDICT = {
    "rebinding builtins.enumerate, which the harness's loop calls": attack("import builtins\n" + REBIND.format("builtins")),
    "editing the harness's job through sys._getframe": attack(
        "import sys\nsys._getframe(1).f_locals['job']['tests'][:] = ['pass'] * 3\n"),
    "rebinding builtins.enumerate from a thread": attack(
        "import builtins, threading\ndef go():\n    " + REBIND.format("builtins").replace("\n", "\n    ").rstrip()
        + "\nt = threading.Thread(target=go)\nt.start()\nt.join()\n"),
    "returning an object whose __eq__ is always True": attack(ANYTHING + "\ndef remove_Occ(s, ch):\n    return Anything()\n"),
    "returning a str subclass whose __eq__ is always True": attack(
        "class S(str):\n    __hash__ = str.__hash__\n\n    def __eq__(self, other):\n        return True\n\n"
        "def remove_Occ(s, ch):\n    return S(s)\n"),
    "rebinding the harness module's own globals": attack("import __main__, builtins\n" + REBIND.format("__main__")),
    "running the harness's _main again on a forged job": attack(MAIN_AGAIN),
    "a signal handler's interrupted frame": attack(
        "import signal\ndef handler(sig, frame):\n" + WALK + "signal.signal(signal.SIGUSR1, handler)\n"
        "signal.raise_signal(signal.SIGUSR1)\n"),
    "an exception's traceback frame": attack(
        "try:\n    raise ValueError\nexcept ValueError as e:\n    frame = e.__traceback__.tb_frame\nif True:\n" + WALK),
    "inspect.stack()": attack(
        "import inspect\nfor info in inspect.stack():\n    job = info.frame.f_locals.get('job')\n"
        "    if isinstance(job, dict) and 'tests' in job:\n        job['tests'][:] = " + EVERY_TEST_PASS + "\n"),
    "a finalizer (__del__) rebinding builtins.enumerate": attack(
        "import builtins\nclass Later:\n    def __del__(self):\n        " + REBIND.format("builtins").replace("\n", "\n        ")
        .rstrip() + "\n\nlater = Later()\ndel later\n"),
    "a gc callback, run in whatever frame collects": attack(
        "import gc, sys\ndef spy(phase, info):\n    frame = sys._getframe(1)\n" + WALK + "gc.callbacks.append(spy)\n"
        "gc.collect()\n"),
    "an exception whose __repr__ reruns the harness's _main when its failure is reported": attack(
        "class Oops(Exception):\n    def __repr__(self):\n        " + MAIN_AGAIN.replace("\n", "\n        ").rstrip()
        + "\n\ndef remove_Occ(s, ch):\n    raise Oops()\n"),
    "reading the hidden tests to answer them": attack(
        "import ast, sys\ndef remove_Occ(s, ch):\n    frame = sys._getframe(1)\n    while 'tests' not in frame.f_locals:\n"
        "        frame = frame.f_back\n    for test in frame.f_locals['tests']:\n        cmp = ast.parse(test).body[0].test\n"
        "        if [ast.literal_eval(a) for a in cmp.left.args] == [s, ch]:\n"
        "            return ast.literal_eval(cmp.comparators[0])\n"),
    "patching math.isclose, which the test imports": attack(
        "import math\nmath.isclose = lambda *a, **k: True\ndef area(r):\n    return 0\n", MATH),
    "a fake math in sys.modules": attack(
        "import sys, types\nsys.modules['math'] = types.SimpleNamespace(isclose=lambda *a, **k: True)\n"
        "def area(r):\n    return 0\n", MATH),
    "redefining the prompt's helper that the test calls": attack(
        "def poly(x):\n    return 0\n\ndef find_zero():\n    return 7\n", PROMPT),
    "a StopIteration that ends the test's map early": attack("def is_prime(n):\n    raise StopIteration\n", MAP),
    "_posixsubprocess.fork_exec (no audit event)": attack(
        "import _posixsubprocess, os\nr, w = os.pipe()\n_posixsubprocess.fork_exec(" + FORK_EXEC_ARGS + ")\n",
        why="blocked _posixsubprocess.fork_exec"),
    "_posixsubprocess built around import by _imp.create_builtin": attack(
        "import _imp, os\nfrom importlib.machinery import ModuleSpec\n"
        "ps = _imp.create_builtin(ModuleSpec('_posixsubprocess', None))\nr, w = os.pipe()\n"
        "ps.fork_exec(" + FORK_EXEC_ARGS + ")\n", why="blocked _posixsubprocess.fork_exec"),
}


# Attacks on the boundary itself (the worker's pipes and handles): they scored 0 on the old harness too, which had
# none; each failed on a first version of this one, or probes what the verdict relies on.
BOUNDARY = {
    "a forged 'stop' on the reply pipe, so that a call ends the test's map early": attack(
        "import os\ndef is_prime(n):\n    data = b'[\"stop\"]'\n    for fd in range(3, 64):\n        try:\n"
        "            os.write(fd, len(data).to_bytes(4, 'big') + data)\n        except OSError:\n            pass\n"
        "    return False\n", MAP, "malformed answer"),
}
VERDICT.update(BOUNDARY)


@pytest.mark.parametrize("name", list(VERDICT))
def test_no_completion_reaches_the_verdict(name, caplog, tmp_path, monkeypatch):
    program, gold, why = VERDICT[name]
    cg = graded_leaving_nothing(program, gold, caplog, tmp_path, monkeypatch)
    assert why in cg.reason, cg.reason


def test_the_code_holds_no_descriptor_but_its_two_pipes():
    """Not the report pipe, even numbered above the sandbox's limit on open files (a grader with many open)."""
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(100)]
    try:
        code = "import os\nOPEN = []\nfor fd in range(3, 1024):\n    try:\n        os.fstat(fd)\n        OPEN.append(fd)\n" \
               "    except OSError:\n        pass\n"
        out = sandbox.run(sandbox.Job(code, ("assert len(OPEN) == 2, OPEN",)), FAST)
    finally:
        for fd in held:
            os.close(fd)
    assert out.ok, out.reason


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


def test_kill_9_of_grade_mid_run_leaves_no_process_and_no_folder(tmp_path):
    """`kill -9` of `grpo-budget grade` while its sandboxes run code that sleeps: 2 s later none of their processes
    lives (their checker sees its stdin end, unshare gets its parent-death signal), and nothing is left in its
    temporary folder (the mount tables are memfds, each root a tmpfs in the run's own mount namespace). A score,
    train or evaluate job grades code through the same sandboxes."""
    tests = json.loads(GOLD11)["tests"]
    rows = [{"text": f"Remove the first and last occurrence of a character (task {task}).", "code": "def remove_Occ(s, ch):\n    return s",
             "task_id": task, "test_setup_code": "", "test_list": tests, "challenge_test_list": []} for task in range(11, 15)]
    (tmp_path / "mbpp.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    sleepy = fenced("import time\ntime.sleep(60)\n" + WRONG11)
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": f"mbpp-{r['task_id']}", "completion": sleepy}) + "\n"
                                              for r in rows))
    own = tmp_path / "tmp"
    own.mkdir()
    grade = subprocess.Popen([sys.executable, "-m", "grpo_budget.cli", "grade", "--dataset", "mbpp", "--data-files",
                              str(tmp_path / "mbpp.jsonl"), "--completions", str(tmp_path / "c.jsonl"), "--out",
                              str(tmp_path / "g.csv")], env={**os.environ, "TMPDIR": str(own)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(ours(grade.pid)) < 4 and time.monotonic() < deadline:  # two runs (unshare, checker, worker)
            assert grade.poll() is None, "grade ended before its sandboxes ran"
            time.sleep(0.1)
        assert len(ours(grade.pid)) >= 4, ours(grade.pid)
        time.sleep(1)  # every run past its setup: the code sleeps
    finally:
        grade.send_signal(signal.SIGKILL)
        grade.wait()
    time.sleep(2)
    assert not ours(grade.pid), f"processes left 2 s after kill -9: {ours(grade.pid)}"
    assert not list(own.iterdir()), list(own.iterdir())
