"""Atomic writes (a killed job never leaves a half-written file that looks complete) and reads that say which
file is broken and how to recover, instead of a library traceback."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
import pyarrow
import pyarrow.parquet as pq

from grpo_budget.digest import sha256_of
from grpo_budget.errors import UserError

# Snakemake does not rebuild a missing intermediate whose consumers are up to date, so "run it again" alone would do
# nothing: naming the file as the target rebuilds it (and then what reads it, on the next run).
EARLIER_JOB = ("it is an output of an earlier job; {}rebuild it with `snakemake {} --configfile YOUR_CONFIG`, then run "
               "your command again")


# What a full disk reads like where the errno is lost (Arrow's and torch.save's C++ writers: "basic_ios::clear:
# iostream error"; torch.save then reports "[enforce fail at inline_container.cc:672] . unexpected pos", the write
# that came up short; safetensors: "No space left on device").
DISK_FULL_TEXT = ("iostream error", "No space left", "inline_container.cc")


def disk_full(e: BaseException | None) -> bool:
    """Whether ``e`` (or an exception it was raised from or while handling) is a write that failed for want of
    space."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(t in str(e) for t in DISK_FULL_TEXT):
            return True
        e = e.__cause__ or e.__context__
    return False


def full_disk(path: str | os.PathLike, what: str) -> UserError:
    """The one line for a write to ``path`` that the disk had no room for: the free space where it was written and
    ``what`` the next run does."""
    folder = _existing(Path(path).parent)
    free = shutil.disk_usage(folder).free / 2**20
    return UserError(f"{path}: the disk is full ({free:.0f} MiB free on the filesystem of {folder}); free space and "
                     f"run again — {what}")


def _remove(tmp_path: Path | None) -> None:
    if tmp_path is None:
        return
    if tmp_path.is_dir():
        shutil.rmtree(tmp_path)
    elif tmp_path.exists():
        tmp_path.unlink()


_ROOT: list[Path] = []  # the results folder of the workflow job this process runs (grpo_budget.cli, confined)


def absolute(path: str | os.PathLike) -> Path:
    """``path`` made absolute and normalized by its text (symlinks kept: a linked folder inside stays inside)."""
    return Path(os.path.normpath(os.path.abspath(path)))


def inside(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """Whether ``path`` lies in the folder ``root`` (or is it)."""
    path, root = absolute(path), absolute(root)
    return path == root or root in path.parents


@contextmanager
def confined(root: str | os.PathLike) -> Iterator[None]:
    """Within the block, :func:`guard` refuses to write, move or delete anything outside the folder ``root``."""
    _ROOT.append(absolute(root))
    try:
        yield
    finally:
        _ROOT.pop()


def guard(path: str | os.PathLike, action: str) -> None:
    """Refuse to ``action`` (write, move, delete) ``path`` outside the results folder of the job this process runs
    (:func:`confined`): a job changes only its own folder, whatever path a record copied from another folder names."""
    if _ROOT and not inside(path, _ROOT[-1]):
        raise UserError(f"{path}: refusing to {action} it, since it lies outside the results folder of this job "
                        f"({_ROOT[-1]}); a job only ever changes its own folder")


@contextmanager
def atomic_path(path: str | os.PathLike, fixed: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (a file, or a folder the block may create in its place);
    rename it onto ``path`` only if the block succeeds. A full disk is a one-line ``UserError`` (the temporary
    file removed, ``path`` as it was). ``fixed``: the temporary is always ``.NAME.partial``, and a leftover there
    is removed first: a killed job (SIGKILL, a lost node) runs no cleanup, and a large one (a model folder) must
    not stay for good; only for an output one job at a time writes (Snakemake and the results folder's lock)."""
    path = Path(path)
    guard(path, "write")
    tmp_path = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if fixed:
            _remove(leftover := path.with_name(f".{path.name}.partial"))
            leftover.touch()
            tmp_path = leftover
        else:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(fd)
            tmp_path = Path(tmp)
        with terminated_as_exit():
            yield tmp_path
        os.replace(tmp_path, path)
    except (OSError, pyarrow.ArrowException) as e:
        if not disk_full(e):
            raise
        _remove(tmp_path)  # first, so the free space reported is what a re-run has
        raise full_disk(path, "nothing was written") from e
    finally:
        _remove(tmp_path)


@contextmanager
def terminated_as_exit() -> Iterator[None]:
    """Within the block, SIGTERM (SLURM's scancel or time limit, a job stopped by its controller) raises SystemExit,
    so that ``finally`` clauses remove what the block left; by default Python would end at once. Only in the main
    thread (where a handler can be set) and where no other handler is set (a caller's own wins)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _existing(folder: Path) -> Path:
    """``folder`` or its nearest existing parent (a full disk can stop the folder's own creation)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def numbered_path(prefix: str) -> Path:
    """The first of ``prefix1``, ``prefix2``, ... that does not exist (where stale or incomplete outputs are moved
    aside, never deleted)."""
    i = 1
    while Path(f"{prefix}{i}").exists():
        i += 1
    return Path(f"{prefix}{i}")


def digest_path(path: str | os.PathLike) -> Path:
    """Where a Parquet output's sha256 is recorded: a hidden file beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}.sha256")


def write_parquet(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write atomically and record the file's sha256 beside it (``read_parquet`` checks it)."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)
        write_text(sha256_of(tmp) + "\n", digest_path(path))


RESULTS = "{results}"  # how a recorded path under the results folder begins (a moved folder keeps its records)


def relative(text: str, results: str) -> str:
    """``text`` with the results folder's path (as given and absolute, where a path begins) written as
    ``{results}``."""
    for root in sorted({results.rstrip("/"), os.path.abspath(results)}, key=len, reverse=True):
        text = re.sub(r"(?<![\w./-])" + re.escape(root) + "/", lambda _: RESULTS + "/", text)
    return text


def write_text(text: str, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(obj: Any, path: str | os.PathLike) -> None:
    write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", path)


def read_json(path: str | os.PathLike) -> Any:
    """A JSON file; a missing or corrupt one is a ``UserError`` naming the file and the fix."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path} does not exist: {EARLIER_JOB.format('', path)}")
    try:
        return json.loads(path.read_text())
    except (ValueError, OSError) as e:
        raise UserError(f"{path} is not readable JSON ({e}): {EARLIER_JOB.format('delete it and ', path)}") from e


def json_lines(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """Each object of a JSON Lines file with its line number (blank lines skipped); a line that is not a JSON
    object is a one-line :class:`UserError` naming the file and the line."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise UserError(f"{path}:{n}: not valid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(obj, dict):
                raise UserError(f"{path}:{n}: each line must be a JSON object, got {type(obj).__name__}")
            yield n, obj


def read_parquet(path: str | os.PathLike, columns: list[str] | None = None) -> pd.DataFrame:
    """Read a Parquet file (only ``columns`` when given); a missing, truncated or foreign file, or one that lacks
    a column, is a ``UserError`` naming the file and the fix."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path} does not exist: {EARLIER_JOB.format('', path)}")
    rebuild = EARLIER_JOB.format("delete it and ", path)
    _check_recorded_digest(path)
    try:
        # The footer holds the schema: reading it first tells a broken file from a missing column.
        missing = [c for c in columns or [] if c not in pq.read_schema(path).names]
        if missing:
            raise UserError(f"{path} lacks column(s) {', '.join(missing)} (written by an older version?): {rebuild}")
        return pd.read_parquet(path, columns=columns)
    except UserError:
        raise
    except (OSError, ValueError, pyarrow.ArrowException) as e:
        reason = " ".join(str(e).split())  # one line, as the CLI prints it
        raise UserError(f"{path} is not a readable Parquet file ({reason}): {rebuild}") from e


def damage(path: str | os.PathLike) -> str | None:
    """What is wrong with an output that exists, found cheaply (a Parquet file's footer read, a JSON file parsed; a
    file cut short loses its footer): a run checks the outputs it would keep before deciding what to run, since a
    damaged file kept with its time looks up to date. None when it reads (or is of another kind)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        if path.suffix == ".parquet":
            pq.read_metadata(path)
        elif path.suffix == ".json":
            json.loads(path.read_text())
    except (OSError, ValueError, pyarrow.ArrowException) as e:
        kind = "Parquet file" if path.suffix == ".parquet" else "JSON"
        return f"not a readable {kind} (cut short or overwritten? {' '.join(str(e).split())[:120]})"
    return None


def _check_recorded_digest(path: Path) -> None:
    """A Parquet output edited or damaged since it was written (readable, but not what its job wrote) is moved
    aside, so that naming it as the target rebuilds it, and refused in one line."""
    try:
        recorded = digest_path(path).read_text().strip()
    except OSError:
        return  # not written by this package (a user's file) or by an older version
    if sha256_of(path) == recorded:
        return
    guard(path, "move")
    aside = numbered_path(f"{path}.mismatch-")
    os.replace(path, aside)
    raise UserError(f"{path} does not match the sha256 recorded when its job wrote it (edited or damaged since): "
                    f"moved it to {aside}; {EARLIER_JOB.format('', path)}")
