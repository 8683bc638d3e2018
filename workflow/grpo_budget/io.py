"""Atomic writes: a killed job never leaves a half-written file that looks complete."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pandas as pd


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (a file, or a folder the block may create in its place);
    rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.is_dir():
            shutil.rmtree(tmp_path)
        elif tmp_path.exists():
            tmp_path.unlink()


def write_parquet(df: pd.DataFrame, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def write_text(text: str, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(obj: Any, path: str | os.PathLike) -> None:
    write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", path)


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text())
