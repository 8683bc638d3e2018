"""One writer per results folder: a live holder refuses a second run; a gone one's lock is taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from grpo_budget.errors import UserError
from grpo_budget.lock import LOCK_FILE, acquire, is_stale, release


def write_lock(folder, **record):
    (folder / LOCK_FILE).write_text(json.dumps({"host": socket.gethostname(), "cwd": "/elsewhere",
                                                "since": "2026-01-01 00:00:00", **record}))


def test_a_live_holder_refuses_a_second_run_in_one_line(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        write_lock(tmp_path, pid=other.pid)
        with pytest.raises(UserError, match=f"in use by another run \\(pid {other.pid} on ") as e:
            acquire(tmp_path)
        assert "\n" not in str(e.value) and "/elsewhere" in str(e.value)
        release(tmp_path)  # not ours: left alone
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == other.pid
    finally:
        other.kill()
        other.wait()
    acquire(tmp_path)  # its holder is gone now: taken over
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    acquire(tmp_path)  # ours already
    release(tmp_path)
    assert not (tmp_path / LOCK_FILE).exists()


def test_staleness_of_blank_dead_foreign_and_slurm_records(monkeypatch):
    host = socket.gethostname()
    assert not is_stale(None, age_s=5) and is_stale(None, age_s=600)  # blank: being written, or a crash's
    assert not is_stale({"host": host, "pid": os.getpid()}, 0)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert is_stale({"host": host, "pid": int(dead.stdout)}, 0)
    assert not is_stale({"host": "another-node", "pid": 1}, 0)  # nothing to ask: kept
    answers = {"1": ("", "slurm_load_jobs error: Invalid job id specified", 1), "2": ("RUNNING", "", 0)}
    monkeypatch.setattr("grpo_budget.lock.subprocess.run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, answers[cmd[3]][2], answers[cmd[3]][0], answers[cmd[3]][1]))
    assert is_stale({"host": "another-node", "pid": 1, "slurm_job_id": "1"}, 0)
    assert not is_stale({"host": "another-node", "pid": 1, "slurm_job_id": "2"}, 0)
