"""Throughput of the code grader: MBPP's reference solutions (passing) through the sandbox, serially (per-completion
overhead) and with one thread per CPU (completions per second). Prints the figures.

    .venv/bin/python perf/sandbox_throughput.py ../shared/data/mbpp/mbpp.jsonl
"""

import os
import sys
import time

from grpo_budget.generation import sandbox
from grpo_budget.generation.codegrade import extract_code, parse_gold
from grpo_budget.prepare import coderows
from grpo_budget.prepare.files import load_local

frame = load_local(sys.argv[1], None, None, None)["train"].head(200)
items = coderows.mbpp_rows(frame, {"question": "text", "tests": "test_list", "setup": "test_setup_code",
                              "solution": "code", "id": "task_id"})
golds = [parse_gold(a) for a in items["answer"]]
# as the grader builds them: the function under test kept where its name shadows a builtin (MBPP 126 defines sum)
jobs = [sandbox.Job(extract_code(s), tuple(g["tests"]), g["setup"], (g["entry_point"],) if g["entry_point"] else ())
        for s, g in zip(items["solution"], golds)]
sandbox.require()
t = time.perf_counter()
serial = [sandbox.run(j) for j in jobs[:40]]
per = (time.perf_counter() - t) / 40
t = time.perf_counter()
bare = [sandbox._run(sandbox.Job("pass", ("pass",)), sandbox.Limits()) for _ in range(40)]
empty = (time.perf_counter() - t) / 40
cpus = len(os.sched_getaffinity(0))
t = time.perf_counter()
out = sandbox.run_many(jobs, threads=cpus)
rate = len(jobs) / (time.perf_counter() - t)
print(f"per completion, serial: {1000 * per:.1f} ms (an empty program: {1000 * empty:.1f} ms of sandbox overhead)")
print(f"{len(jobs)} MBPP references, {cpus} threads on {cpus} CPUs: {rate:.1f} completions/s, "
      f"{sum(o.ok for o in out)} passed")
