"""What made the outputs decides what re-runs (grpo_budget.experiment.provenance), on a copy of the tiny run.

Each case is a dry run of the plain command after what a hurried user does: move the folder, dry-run or try
another config while the folder is in use, delete or truncate records, delete an output. A dry run shows what
the plain command would run; the copy keeps the session's run intact for the tests that read it."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TINY, edited_config
from grpo_budget.lock import LOCK_FILE

ROOT = Path(__file__).resolve().parents[1]
TRAIN_JOBS = 3  # hard, random and full arms, one seed


def snakemake(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=ROOT, capture_output=True,
                          text=True)


def planned(out: subprocess.CompletedProcess) -> dict[str, int]:
    """The dry run's job counts by rule ({} for "Nothing to be done")."""
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    text = out.stdout + out.stderr
    if "Nothing to be done" in text:
        return {}
    table = text.split("Job stats:", 1)[1].split("\n\n", 1)[0].splitlines()[3:]
    return {rule: int(n) for rule, n in (line.split() for line in table) if rule != "total"}


def files(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*") if p.is_file()}


@pytest.fixture()
def moved(tiny_run, tmp_path) -> Path:
    """The session's tiny run moved elsewhere (a copy keeping times and content, as `mv` does)."""
    results = tmp_path / "elsewhere" / "results"
    shutil.copytree(tiny_run, results, symlinks=True)
    return results


@pytest.mark.slow
@pytest.mark.tiny_reader
def test_a_moved_folder_reruns_nothing_and_other_configs_change_nothing_it_decides(moved, tmp_path):
    args = ("-n", "--configfile", str(TINY), "--config", f"results={moved}")
    assert planned(snakemake(*args)) == {}  # moved: nothing re-runs (paths are recorded relative to the folder)

    other = edited_config(TINY, tmp_path / "other.yaml", results=str(moved), training={"max_steps": 9})
    before = files(moved)
    dry = snakemake("-n", "--configfile", str(other))
    assert planned(dry)["train"] == TRAIN_JOBS
    assert "made with other settings (settings.max_steps); re-running it" in dry.stderr
    assert files(moved) == before  # a dry run of another config writes nothing

    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:  # another clone's run holds the folder: a run of this other config is refused, and writes nothing
        (moved / LOCK_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": holder.pid, "cwd": "/x"}))
        before = files(moved)
        refused = snakemake("--configfile", str(other))
        assert refused.returncode != 0 and "this results folder is in use by another run" in refused.stderr
        assert files(moved) == before
    finally:
        holder.kill()
        holder.wait()
        (moved / LOCK_FILE).unlink()
    assert planned(snakemake(*args)) == {}  # what the first config made is still its own


@pytest.mark.slow
@pytest.mark.tiny_reader
def test_unknown_records_and_missing_outputs_rerun_with_a_line_saying_why(moved, tiny_run):
    args = ("-n", "--configfile", str(TINY), "--config", f"results={moved}")
    shutil.rmtree(moved / "provenance" / "train")
    dry = snakemake(*args)
    assert planned(dry)["train"] == TRAIN_JOBS and dry.stderr.count("no record of what made its outputs") == TRAIN_JOBS
    shutil.copytree(tiny_run / "provenance" / "train", moved / "provenance" / "train")

    arm = "tiny_framearith_hard_b0.2_s0"
    (moved / "provenance" / "select" / f"{arm}.json").write_text('{"digest": ')  # truncated
    dry = snakemake(*args)
    assert f"select job {arm}: its record is unreadable; re-running it" in dry.stderr
    assert planned(dry)["select"] == 1 and planned(dry)["train"] == 1
    shutil.copy2(tiny_run / "provenance" / "select" / f"{arm}.json", moved / "provenance" / "select")

    # a manifest deleted (evaluation sets a checkpoint aside and deletes it): its arm retrains and re-evaluates
    manifest = moved / "runs/tiny/framearith/random/b0.2/s0/manifest.json"
    manifest.unlink()
    dry = snakemake(*args)
    assert f"its input {manifest} is missing; re-running it" in dry.stderr
    jobs = planned(dry)
    assert jobs["train"] == 1 and jobs["evaluate"] == 1 and jobs["summary"] == 1


@pytest.mark.slow
@pytest.mark.tiny_reader
def test_a_controller_killed_with_sigkill_leaves_one_trainer_per_arm(moved):
    """kill -9 of the controller while an arm trains: the trainer keeps running (held here with SIGSTOP so that
    the test does not race it); the next run, after `snakemake --unlock`, does not start a second trainer on the
    same checkpoints but fails that job in one line naming the first, which then ends alone and writes its outputs
    and record (the next run takes them: Snakemake re-runs the job it lost track of, which resumes at the end)."""
    import os
    import signal
    import time

    arm = "tiny_framearith_hard_b0.2_s0"
    run = moved / "runs/tiny/framearith/hard/b0.2/s0"
    shutil.rmtree(run / "checkpoints")
    target = str(run / "manifest.json")
    args = (target, "--configfile", str(TINY), "--config", f"results={moved}")
    lock = moved / "provenance" / "train" / f"{arm}.json.lock"
    controller = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", "--forcerun", "train", *args],
                                  cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not lock.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    trainer = json.loads(lock.read_text())["pid"]
    os.kill(trainer, signal.SIGSTOP)
    controller.kill()  # SIGKILL: its jobs keep running
    controller.wait()
    try:
        assert snakemake("--unlock", *args).returncode == 0
        second = snakemake(*args)
        assert second.returncode != 0
        assert f"train job {arm}: another process is running this job (pid {trainer} on" in second.stderr
    finally:
        os.kill(trainer, signal.SIGCONT)
    while True:  # the first trainer finishes its run, alone, and writes its outputs and record
        try:
            os.kill(trainer, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    assert json.loads((run / "manifest.json").read_text())["final_step"] == 6
    assert not lock.exists() and (moved / "provenance" / "train" / f"{arm}.json").exists()
