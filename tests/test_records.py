"""What made the outputs decides what re-runs (grpo_budget.experiment.provenance), on a copy of the tiny run.

Each case is a dry run of the plain command after what a hurried user does: move the folder, dry-run or try
another config while the folder is in use, delete or truncate records, delete an output. A dry run shows what
the plain command would run; the copy keeps the session's run intact for the tests that read it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
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
@pytest.mark.beside
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
@pytest.mark.beside
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
@pytest.mark.beside
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


def checksums(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def as_written_before(manifest: Path, folder: Path) -> None:
    """The manifest as training wrote it before paths were relative: absolute, into ``folder`` (the folder it was
    made in); its time kept, so that Snakemake takes it as the same input."""
    st = manifest.stat()
    manifest.write_text(manifest.read_text().replace("{results}/", f"{folder}/"))
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.slow
def test_a_copy_evaluates_its_own_checkpoints_and_a_moved_folder_re_evaluates_without_training(tiny_run, tmp_path):
    """cp -a of the tiny run, one of its adapters overwritten in place: the copy's evaluation catches it (its manifest
    as this version writes it, and as the version before wrote it: absolute paths into the original), and the
    original folder is byte for byte unchanged. mv of another copy, then a changed evaluation setting: the moved
    folder re-evaluates every arm and trains nothing; an arm whose manifest is gone resumes at its last checkpoint."""
    before = checksums(tiny_run)
    evals = [p.relative_to(tiny_run) for p in sorted(tiny_run.glob("runs/*/*/*/*/*/eval/*.parquet"))]
    hard, random = (Path(f"runs/tiny/framearith/{arm}/b0.2/s0") for arm in ("hard", "random"))

    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(tiny_run), str(copy)], check=True)
    as_written_before(copy / random / "manifest.json", tiny_run)
    for arm in (hard, random):
        adapter = copy / arm / "checkpoints/checkpoint-6/adapter_model.safetensors"
        data = bytearray(adapter.read_bytes())
        data[-4:] = bytes(b ^ 0xFF for b in data[-4:])  # other weights, same size and header
        adapter.write_bytes(bytes(data))
    cfg = edited_config(TINY, tmp_path / "copy.yaml", results=str(copy), evaluation={"num_samples": 1})
    out = snakemake(*[str(copy / e) for e in evals], "--keep-going", "--configfile", str(cfg))
    assert out.returncode != 0
    for arm in (hard, random):
        assert (f"grpo-budget: error: checkpoint {copy / arm}/checkpoints/checkpoint-6: its adapter_model.safetensors "
                "does not match the sha256 recorded at training") in out.stderr
        assert (copy / arm / "checkpoints/incomplete/checkpoint-6.1").is_dir()
        assert not (copy / arm / "manifest.json").exists()
    assert "rule train:" not in out.stdout + out.stderr
    assert checksums(tiny_run) == before  # the original: nothing read into the copy's results, nothing moved

    old, moved = tmp_path / "old" / "results", tmp_path / "elsewhere" / "results"
    old.parent.mkdir()
    subprocess.run(["cp", "-a", str(tiny_run), str(old)], check=True)
    as_written_before(old / hard / "manifest.json", old)  # made before this change, then moved
    moved.parent.mkdir()
    subprocess.run(["mv", str(old), str(moved)], check=True)
    (moved / random / "manifest.json").unlink()
    trained = {p: p.stat().st_mtime_ns for p in moved.glob("runs/*/*/*/*/*/checkpoints/*/*") if p.is_file()}
    cfg = edited_config(TINY, tmp_path / "moved.yaml", results=str(moved), evaluation={"num_samples": 1})
    out = snakemake(*[str(moved / e) for e in evals], "--configfile", str(cfg))
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-4000:]
    assert text.count("rule evaluate:") == len(evals) and text.count("rule train:") == 1
    manifest = json.loads((moved / random / "manifest.json").read_text())
    assert manifest["resumed_from_step"] == manifest["final_step"] == 6
    assert "already reaches max_steps: nothing to train" in (moved / "logs/train/tiny_framearith_random_b0.2_s0.log"
                                                               ).read_text()
    assert {p: p.stat().st_mtime_ns for p in trained} == trained  # no checkpoint was written again
    assert not list(moved.glob("runs/**/checkpoints.stale-*")) and not list(moved.glob("runs/**/incomplete"))
    for e in evals:
        assert pd.read_parquet(moved / e)["n_samples"].eq(1).all()
    assert checksums(tiny_run) == before


@pytest.mark.slow
@pytest.mark.beside
def test_a_damaged_intermediate_kept_with_its_time_is_rebuilt_with_a_line_saying_why(moved):
    """An evaluation table cut short and a manifest overwritten, each with its time kept (a copy interrupted, a disk
    error): the plain command said "Nothing to be done", and only the job that read them later failed. Their
    footers and JSON are checked as the run starts, and the jobs that made them re-run."""
    args = ("-n", "--configfile", str(TINY), "--config", f"results={moved}")
    table = moved / "runs/tiny/framearith/hard/b0.2/s0/eval/framearith.parquet"
    manifest = moved / "runs/tiny/framearith/random/b0.2/s0/manifest.json"
    for path, cut in ((table, table.stat().st_size // 2), (manifest, 40)):
        st = path.stat()
        path.write_bytes(path.read_bytes()[:cut])
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    dry = snakemake(*args)
    assert (f"grpo-budget: evaluate job tiny_framearith_hard_b0.2_s0_framearith: its output {table} is not a "
            "readable Parquet file (cut short or overwritten?") in dry.stderr
    assert (f"grpo-budget: train job tiny_framearith_random_b0.2_s0: its output {manifest} is not a readable JSON "
            "(cut short or overwritten?") in dry.stderr
    jobs = planned(dry)
    assert jobs["evaluate"] == 2 and jobs["train"] == 1 and "score" not in jobs


@pytest.mark.slow
@pytest.mark.beside
def test_a_report_during_a_run_is_refused_and_a_read_only_folder_is_named(moved, tmp_path):
    """snakemake --report while a run holds the folder packed the previous run's tables without a word: refused,
    naming the run. A run on a read-only folder (a real read-only bind mount, in a user and mount namespace) got
    only Snakemake's "Write-protected output files": a line says the filesystem is read-only first."""
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (moved / LOCK_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": holder.pid, "cwd": "/x"}))
        out = snakemake("--report", str(tmp_path / "report.html"), "--configfile", str(TINY), "--config",
                        f"results={moved}")
        assert out.returncode != 0 and not (tmp_path / "report.html").exists()
        assert (f"{moved}: a run is writing this results folder now (pid {holder.pid} on {socket.gethostname()}, run "
                "from /x") in out.stderr
        assert "so a report would pack the previous run's tables and figures" in out.stderr
    finally:
        holder.kill()
        holder.wait()
        (moved / LOCK_FILE).unlink()

    other = edited_config(TINY, tmp_path / "other.yaml", results=str(moved), evaluation={"num_samples": 1})
    before = files(moved)
    read_only = f"mount --bind {moved} {moved} && mount -o remount,bind,ro {moved}"
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", read_only], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot bind-mount read-only in a user namespace here: {probe.stderr.strip()}")
    run = f"{read_only} && {sys.executable} -m snakemake --cores 2 --configfile {other}"
    out = subprocess.run(["unshare", "-rm", "sh", "-c", run], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode != 0
    assert (f"grpo-budget: {moved} is on a read-only filesystem: no job can write its outputs there; make it "
            "writable, or copy it and point results: at the copy") in out.stderr
    assert "Write-protected output files" in out.stderr  # Snakemake's own, after ours
    assert files(moved) == before
