"""Atomic writes and checked reads: a full disk named as such (nothing written), a Parquet output edited since its
job wrote it set aside and refused in one line."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pyarrow.lib
import pytest

from grpo_budget.errors import UserError
from grpo_budget.io import digest_path, read_parquet, write_json, write_parquet


def one_line(e: pytest.ExceptionInfo) -> str:
    assert "\n" not in str(e.value)
    return str(e.value)


def test_a_parquet_output_edited_since_it_was_written_is_set_aside_and_refused(tmp_path):
    target = tmp_path / "scores" / "m" / "d.parquet"
    write_parquet(pd.DataFrame({"id": ["a", "b"], "pass_rate": [0.25, 0.75]}), target)
    assert digest_path(target).is_file() and read_parquet(target)["pass_rate"].tolist() == [0.25, 0.75]
    pd.DataFrame({"id": ["a", "b"], "pass_rate": [0.75, 0.25]}).to_parquet(target, index=False)  # readable, not its
    with pytest.raises(UserError) as e:
        read_parquet(target)
    assert one_line(e).startswith(f"{target} does not match the sha256 recorded when its job wrote it (edited or "
                                  f"damaged since): moved it to {target}.mismatch-1; it is an output of an earlier job; "
                                  f"rebuild it with `snakemake {target} --configfile YOUR_CONFIG`")
    assert not target.exists() and (tmp_path / "scores/m/d.parquet.mismatch-1").is_file()
    write_parquet(pd.DataFrame({"id": ["a"], "pass_rate": [0.5]}), target)  # the rebuild records its own digest
    assert read_parquet(target)["pass_rate"].tolist() == [0.5]


def test_a_parquet_file_without_a_record_is_read_as_it_is(tmp_path):
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "user.parquet")  # a user's file, or an older version's output
    assert read_parquet(tmp_path / "user.parquet")["a"].tolist() == [1]


@pytest.fixture
def small_disk(tmp_path):
    """A real 256 KiB filesystem (tmpfs; needs root), filled up to its last few KiB."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        (mount / "data").mkdir()
        (mount / "data" / "pool.parquet").write_bytes(b"the old table")
        try:
            with open(mount / "filler", "wb") as f:
                while True:
                    f.write(b"x" * 4096)
                    f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_really_full_disk_is_named_and_keeps_the_old_file(small_disk):
    target = small_disk / "data" / "pool.parquet"
    frame = pd.DataFrame({"prompt": [f"item {i} " * 20 for i in range(2000)]})
    with pytest.raises(UserError) as e:
        write_parquet(frame, target)
    assert one_line(e).startswith(f"{target}: the disk is full (0 MiB free on the filesystem of {target.parent})")
    assert target.read_bytes() == b"the old table" and sorted(p.name for p in target.parent.iterdir()) == ["pool.parquet"]


@pytest.fixture
def free_3_mib(monkeypatch):
    asked = []

    def usage(folder):
        asked.append(Path(folder))
        return shutil._ntuple_diskusage(100 * 2**20, 97 * 2**20, 3 * 2**20)

    monkeypatch.setattr(shutil, "disk_usage", usage)
    return asked


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"),
                                   pyarrow.lib.ArrowIOError("basic_ios::clear: iostream error")])
def test_a_full_disk_while_writing_parquet(tmp_path, monkeypatch, free_3_mib, error):
    target = tmp_path / "data" / "pool.parquet"
    target.parent.mkdir()
    target.write_bytes(b"the old table")

    def half_written(self, path, **kwargs):
        Path(path).write_bytes(b"PAR1 half")
        raise error

    monkeypatch.setattr(pd.DataFrame, "to_parquet", half_written)
    with pytest.raises(UserError) as e:
        write_parquet(pd.DataFrame({"a": [1]}), target)
    assert one_line(e) == (f"{target}: the disk is full (3 MiB free on the filesystem of {target.parent}); free space "
                           "and run again — nothing was written")
    assert target.read_bytes() == b"the old table" and [p.name for p in target.parent.iterdir()] == ["pool.parquet"]
    assert free_3_mib == [target.parent]


def test_a_full_disk_while_writing_json(tmp_path, monkeypatch, free_3_mib):
    def full(self, text, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(UserError, match=r"manifest.json: the disk is full \(3 MiB free"):
        write_json({"a": 1}, tmp_path / "manifest.json")
    assert list(tmp_path.iterdir()) == []


def test_another_write_error_is_left_alone(tmp_path, monkeypatch):
    def denied(self, path, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", denied)
    with pytest.raises(PermissionError):
        write_parquet(pd.DataFrame({"a": [1]}), tmp_path / "x.parquet")
    assert list(tmp_path.iterdir()) == []
