"""One writer per results folder: a live holder refuses a second run; a gone one's lock is taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

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
    monkeypatch.setenv("SLURM_JOB_ID", "2")  # a requeued job keeps its id: its lock from the node it left is its own
    assert is_stale({"host": "another-node", "pid": 1, "slurm_job_id": "2"}, 0)


def grpo_budget(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grpo_budget.cli", *args], capture_output=True, text=True)


def test_one_process_per_job_even_after_its_controller_is_killed(tmp_path):
    """A job's command holds its own lock while it runs (a controller killed with kill -9 leaves it running, and
    the next run starts the same job): a second process for the job refuses in one line and writes nothing; once
    the first is gone (kill -9 too), the job runs and writes its record."""
    record = tmp_path / "provenance/train/arm.json"
    config = Path(__file__).parent / "configs" / "tiny.yaml"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from grpo_budget.lock import holding\n"
        f"with holding({str(record) + '.lock'!r}, 'x'):\n    print('held', flush=True); time.sleep(120)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        second = grpo_budget("--record-out", str(record), "--record", '{"digest": "d"}', "validate-config", str(config))
        assert second.returncode == 2 and not record.exists()
        assert second.stderr.startswith(f"grpo-budget: error: validate-config job arm: another process is running "
                                        f"this job (pid {holder.pid} on {socket.gethostname()}")
        assert len(second.stderr.strip().splitlines()) == 1
    finally:
        holder.kill()  # SIGKILL: its lock file stays behind, naming a dead process
        holder.wait()
    assert (tmp_path / "provenance/train/arm.json.lock").exists()
    third = grpo_budget("--record-out", str(record), "--record", '{"digest": "d"}', "validate-config", str(config))
    assert third.returncode == 0, third.stderr
    assert json.loads(record.read_text()) == {"digest": "d"} and not (tmp_path / "provenance/train/arm.json.lock").exists()


def test_unlock_removes_the_locks_of_runs_that_are_gone_and_says_which(tmp_path):
    write_lock(tmp_path, host="another-node", pid=1)  # a login node's run that is gone: nothing here can tell
    jobs = tmp_path / "provenance/train"
    jobs.mkdir(parents=True)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (jobs / "a.json.lock").write_text(json.dumps({"host": socket.gethostname(), "pid": live.pid}))
        (jobs / "b.json.lock").write_text("")
        out = grpo_budget("unlock", str(tmp_path))
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0] == f"removed {tmp_path / LOCK_FILE} (pid 1 on another-node, run from /elsewhere, since 2026-01-01 00:00:00)"
        assert lines[1].startswith(f"kept {jobs / 'a.json.lock'}: held by a live process (pid {live.pid} on ")
        assert lines[2] == f"removed {jobs / 'b.json.lock'} (a run whose lock record is unreadable)"
        assert not (tmp_path / LOCK_FILE).exists() and (jobs / "a.json.lock").exists()
    finally:
        live.kill()
        live.wait()
    assert grpo_budget("unlock", str(tmp_path)).stdout.splitlines() == [f"removed {jobs / 'a.json.lock'} "
                                                                       f"(pid {live.pid} on {socket.gethostname()}, run from None, since None)"]


def test_a_read_only_results_folder_is_one_line(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        with pytest.raises(UserError, match=f"{folder}: cannot write here"):
            acquire(folder)
    finally:
        folder.chmod(0o755)
