"""One writer per results folder, and one process per job: lock files, each naming its holder.

Snakemake's own lock is per working directory, so two clones (or two configs) pointed at one ``results:`` folder
would both write it and each report the other's numbers: a run holds ``RESULTS/.grpo-budget.lock`` from its start
to its end. A controller killed with ``kill -9`` leaves its jobs running, and the next run would start them again:
each job's command holds its own lock (``provenance/{rule}/{job}.json.lock``) while it runs. A holder that is gone
(a dead process on this host, a SLURM job that no longer exists) leaves a stale lock that the next taker takes over;
one left by another host's process is removed by ``grpo-budget unlock RESULTS``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from grpo_budget.errors import UserError

LOCK_FILE = ".grpo-budget.lock"
BLANK_GRACE_S = 60  # a lock file being written is blank for an instant; an old blank one is a crashed writer's


def holder() -> dict:
    """This process, as a lock records it."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "cwd": os.getcwd(),
            "slurm_job_id": os.environ.get("SLURM_JOB_ID"), "since": time.strftime("%Y-%m-%d %H:%M:%S")}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _slurm_job_gone(job_id: str) -> bool:
    """Whether SLURM says the job is unknown (it ended long enough ago to be purged, or never existed)."""
    try:
        done = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False  # no way to tell: keep the lock
    state = done.stdout.strip()
    return "Invalid job id" in done.stderr or (done.returncode == 0 and state in ("", "COMPLETED", "FAILED",
                                                                                  "CANCELLED", "TIMEOUT"))


def is_stale(record: dict | None, age_s: float, host: str | None = None) -> bool:
    """Whether a lock's holder is gone. ``record``: the lock's content (None when blank or unreadable);
    ``age_s``: the lock file's age."""
    if not isinstance(record, dict):
        return age_s > BLANK_GRACE_S
    if record.get("host") == (host or socket.gethostname()) and isinstance(record.get("pid"), int):
        return not _pid_alive(record["pid"])
    if record.get("slurm_job_id"):
        if str(record["slurm_job_id"]) == os.environ.get("SLURM_JOB_ID"):
            return True  # this SLURM job's own earlier run on another node: requeued (preempted), it keeps its id
        return _slurm_job_gone(str(record["slurm_job_id"]))
    return False  # another host's process, with no way to ask whether it is alive


def describe(record: dict | None) -> str:
    if not isinstance(record, dict):
        return "a run whose lock record is unreadable"
    job = f", SLURM job {record['slurm_job_id']}" if record.get("slurm_job_id") else ""
    return f"pid {record.get('pid')} on {record.get('host')}{job}, run from {record.get('cwd')}, since {record.get('since')}"


def _read(path: Path) -> tuple[dict | None, float]:
    try:
        text, age = path.read_text(), time.time() - path.stat().st_mtime
    except FileNotFoundError:
        raise
    except OSError:
        return None, 0.0
    try:
        return json.loads(text), age
    except ValueError:
        return None, age


def acquire(results: str | os.PathLike) -> Path:
    """Take the lock of ``results`` for this process (a UserError when a live run holds it); returns its path."""
    path = Path(results) / LOCK_FILE
    return take(path, lambda record: (
        f"{results}: this results folder is in use by another run ({describe(record)}); two runs writing one folder "
        f"would mix their outputs: wait for it to end or point `results:` at another folder (if that run is gone, "
        f"`grpo-budget unlock {results}` removes its locks)"))


def take(path: Path, in_use: Callable[[dict | None], str]) -> Path:
    """Take the lock file ``path`` for this process; a live holder's is refused with ``in_use(its record)``; a
    stale one (:func:`is_stale`) is taken over."""
    me = holder()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _unwritable(path.parent, e) from None
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                record, age = _read(path)
            except FileNotFoundError:
                continue  # released meanwhile
            if isinstance(record, dict) and record.get("host") == me["host"] and record.get("pid") == me["pid"]:
                return path
            if not is_stale(record, age, me["host"]):
                raise UserError(in_use(record)) from None
            path.unlink(missing_ok=True)  # its holder is gone
            continue
        except PermissionError as e:
            raise _unwritable(path.parent, e) from None
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        return path
    raise UserError(f"{path}: could not take the lock (it kept changing); run again")


def _unwritable(folder: Path, e: OSError) -> UserError:
    return UserError(f"{folder}: cannot write here ({e.strerror}): a run needs a writable results folder")


def in_use(results: str | os.PathLike) -> str | None:
    """Who holds the lock of ``results`` (a run writing it now; one that may be, on another host), or None."""
    try:
        record, age = _read(Path(results) / LOCK_FILE)
    except FileNotFoundError:
        return None
    return None if is_stale(record, age) else describe(record)


def refuse_report(results: str | os.PathLike) -> None:
    """A report packs the folder's tables and figures as they are: during a run, those of the run before it, some
    already replaced. Refused in one line naming the run."""
    holder = in_use(results)
    if holder:
        raise UserError(f"{results}: a run is writing this results folder now ({holder}), so a report would pack "
                        "the previous run's tables and figures, some already replaced by this run's: make the report "
                        f"once it ends (if it is gone, `grpo-budget unlock {results}` removes its lock)")


def read_only(results: str | os.PathLike) -> str | None:
    """Why no job could write in ``results`` (a read-only filesystem, or a folder this user may not write), or None
    (it is writable, or does not exist yet)."""
    folder = Path(results)
    if not folder.is_dir():
        return None
    if os.statvfs(folder).f_flag & os.ST_RDONLY:
        return f"{results} is on a read-only filesystem"
    if not os.access(folder, os.W_OK):
        return f"{results} is read-only for this user (its permissions)"
    return None


def release(results: str | os.PathLike) -> None:
    """Drop the lock of ``results`` if this process holds it."""
    drop(Path(results) / LOCK_FILE)


def drop(path: Path) -> None:
    """Remove the lock file ``path`` if this process holds it."""
    try:
        record, _ = _read(path)
    except FileNotFoundError:
        return
    me = holder()
    if isinstance(record, dict) and record.get("host") == me["host"] and record.get("pid") == me["pid"]:
        path.unlink(missing_ok=True)


@contextmanager
def holding(path: str | os.PathLike, what: str) -> Iterator[Path]:
    """One process per job: hold the lock file ``path`` while the block runs (a UserError naming ``what`` and the
    holder when another live process holds it, so a second writer never writes beside it)."""
    lock = take(Path(path), lambda record: (
        f"{what}: another process is running this job ({describe(record)}); two writers would mix its outputs: "
        f"wait for it to end (if it is gone, `grpo-budget unlock RESULTS` removes its lock)"))
    try:
        yield lock
    finally:
        drop(lock)


def live_here(record: dict | None) -> bool:
    """Whether a lock's holder is a live process on this host or a SLURM job SLURM still runs."""
    if not isinstance(record, dict):
        return False
    if record.get("host") == socket.gethostname() and isinstance(record.get("pid"), int):
        return _pid_alive(record["pid"])
    return bool(record.get("slurm_job_id")) and not _slurm_job_gone(str(record["slurm_job_id"]))


def unlock(results: str | os.PathLike) -> list[str]:
    """Remove the results folder's lock and its jobs' locks (``provenance/**.lock``) unless their holder is a live
    process on this host or a running SLURM job: a lock left by a run on another node that is gone. Returns one
    line per lock, saying whether it was removed or kept and whose it was."""
    root = Path(results)
    lines = []
    for path in [root / LOCK_FILE, *sorted((root / "provenance").glob("**/*.lock"))]:
        try:
            record, _ = _read(path)
        except FileNotFoundError:
            continue
        if live_here(record):
            lines.append(f"kept {path}: held by a live process ({describe(record)})")
        else:
            path.unlink(missing_ok=True)
            lines.append(f"removed {path} ({describe(record)})")
    return lines or [f"{results}: no locks"]
