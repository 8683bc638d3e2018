"""Reading a benchmark's copy: local data files (format inference; bytes that are not UTF-8, JSON Lines errors and a
.json object without its rows' key named by file and line) or the Hugging Face hub, as ``{split: frame}``."""

from __future__ import annotations

import codecs
import glob
import gzip
import json
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_budget.errors import UserError
from grpo_budget.io import json_lines

FORMATS = {"json": "json", "jsonl": "json", "parquet": "parquet", "csv": "csv", "arrow": "arrow"}
_TEXT_FORMATS = ("json", "csv")  # read as UTF-8 text (Parquet and Arrow are binary)
ROWS_KEY = "examples"  # the key of a .json file's object that holds its rows (BBH's files)


def folder_files(folder: Path) -> list[str]:
    """The data files a folder named in ``data_files`` stands for: those of a known format, sorted."""
    return sorted(str(q) for q in folder.iterdir()
                  if q.is_file() and Path(q.name.removesuffix(".gz")).suffix.lstrip(".") in FORMATS)


def expand_files(files: Any) -> list[str]:
    if isinstance(files, (str, Path)):
        files = [files]
    out: list[str] = []
    for f in files:
        p = Path(f)
        if p.is_dir():
            found = folder_files(p)
            if not found:
                raise FileNotFoundError(f"no data files (json/jsonl/parquet/csv) in {p}")
            out.extend(found)
        else:
            if "*" not in str(f) and not p.exists():
                raise FileNotFoundError(f"data file not found: {f}")
            out.append(str(f))
    return out


def local_files(data_files: Any) -> list[str]:
    """Every file a ``spec.data_files`` value names (a path, a folder, a glob, a list or a split -> files mapping),
    for content tracking; names that match nothing are left out (the prepare job itself names them)."""
    if data_files is None:
        return []
    if isinstance(data_files, dict):
        return [f for v in data_files.values() for f in local_files(v)]
    if isinstance(data_files, (str, Path)):
        data_files = [data_files]
    out: list[str] = []
    for f in map(str, data_files):
        p = Path(f)
        if p.is_dir():
            out += folder_files(p)
        elif "*" in f:
            out += sorted(glob.glob(f))
        elif p.is_file():
            out.append(f)
    return out


def infer_format(files: list[str], fmt: str | None) -> str:
    if fmt:
        if fmt not in FORMATS:
            raise ValueError(f"unknown data format {fmt!r}; expected one of {sorted(FORMATS)}")
        return FORMATS[fmt]
    suffixes = {Path(f.removesuffix(".gz")).suffix.lstrip(".").lower() for f in files}  # HumanEval's .jsonl.gz
    formats = {FORMATS.get(s) for s in suffixes}
    if len(formats) != 1 or None in formats:
        raise ValueError(f"cannot infer the format of {files}; give spec['format']")
    return formats.pop()


def json_field(files: list[str], fmt: str, field: str | None) -> str | None:
    """The key of a .json file's object that holds the rows (``field``, else :data:`ROWS_KEY` where the file has
    it); None for JSON Lines and lists of rows. An object without that key is refused in one line: read as it is,
    it would be one row (or a parse error) that names no key."""
    if fmt != "json":
        return field
    key, found = field or ROWS_KEY, field
    for f in files:
        if f.endswith(".jsonl") or "*" in f:
            continue
        keys = _object_keys(f)
        if keys is None:
            continue
        if key not in keys:
            other = "set spec.field to the key that holds them, or " if field is None else ""
            raise UserError(f"{f}: a JSON object without the key {key!r} (its keys: {', '.join(keys) or 'none'}); "
                            f"it must hold the rows as a list of objects under {key!r} (BBH: "
                            f'{{"{ROWS_KEY}": [{{"input": ..., "target": "(A)"}}, ...]}}); {other}save the rows as '
                            "JSON lines, one object per line, in a .jsonl file")
        found = key
    return found


def _object_keys(path: str) -> list[str] | None:
    """The keys of the one JSON object a .json file holds; None when it holds JSON Lines (an object on each line),
    a list, or no valid JSON (the reader's error then names the line)."""
    with open(path, "rb") as fh:
        first = fh.readline().removeprefix(codecs.BOM_UTF8)
        if not first.lstrip().startswith(b"{"):
            return None
        try:
            obj = json.loads(first)
            if fh.read(1 << 16).strip():  # a second object after the first line's: JSON Lines
                return None
        except ValueError:  # an object over several lines: read it whole
            try:
                obj = json.loads(first + fh.read())
            except ValueError:
                return None
    return [str(k) for k in obj] if isinstance(obj, dict) else None


def _check_utf8(files: list[str]) -> None:
    """A text data file whose bytes are not UTF-8 is named with its line and byte offset (the reader accepts it
    and a bare UnicodeDecodeError surfaces later, on some row's text)."""
    for f in files:
        for name in sorted(glob.glob(f)) if "*" in f else [f]:
            offset = 0
            with (gzip.open if name.endswith(".gz") else open)(name, "rb") as fh:
                for n, line in enumerate(fh, start=1):
                    try:
                        line.decode("utf-8")
                    except UnicodeDecodeError as e:
                        raise UserError(f"{name}:{n}: byte {offset + e.start:,} (0x{line[e.start]:02x}) is not UTF-8 "
                                        f"({e.reason}); save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)"
                                        ) from None
                    offset += len(line)


def load_local(data_files: Any, fmt: str | None, field: str | None, cache_dir: str | None) -> dict[str, pd.DataFrame]:
    import datasets

    if isinstance(data_files, dict):
        expanded: Any = {str(k): expand_files(v) for k, v in data_files.items()}
        all_files = [f for v in expanded.values() for f in v]
    else:
        expanded = expand_files(data_files)
        all_files = expanded
    fmt = infer_format(all_files, fmt)
    if fmt in _TEXT_FORMATS:
        _check_utf8(all_files)
    kwargs: dict[str, Any] = {"data_files": expanded}
    jf = json_field(all_files, fmt, field)
    if jf:
        kwargs["field"] = jf
    if cache_dir:
        kwargs["cache_dir"] = cache_dir
    try:
        dd = datasets.load_dataset(fmt, **kwargs)
    except Exception as e:  # noqa: BLE001 - the library's parse errors name neither file nor line
        bad = _first_bad_json_line(all_files) if fmt == "json" and not jf else None
        raise UserError(bad or f"{', '.join(all_files)}: cannot be read as {fmt} ({' '.join(str(e).split())})") from e
    frames = {split: dd[split].to_pandas() for split in dd}
    if fmt == "csv":
        for frame in frames.values():
            glued = [c for c in frame.columns if ";" in str(c) or "\t" in str(c)]
            if glued:
                raise UserError(f"{', '.join(all_files)}: read as comma-separated, its header {glued[0]!r} is one "
                                "column; save it with commas between columns (or as JSON lines)")
    return frames


def _first_bad_json_line(files: list[str]) -> str | None:
    """``FILE:LINE: what is wrong`` for the first line of a JSON Lines file that is not a JSON object."""
    for f in files:
        if "*" in f:
            continue
        try:
            for _ in json_lines(f):
                pass
        except UserError as e:
            return str(e)
    return None


def load_hub(hub_id: str, configs: Any, split: str | None, cache_dir: str | None) -> dict[str, pd.DataFrame]:
    import datasets

    if configs is None or isinstance(configs, str):
        configs = [configs]
    parts: dict[str, list[pd.DataFrame]] = {}
    for cfg in configs:
        kwargs: dict[str, Any] = {}
        if cache_dir:
            kwargs["cache_dir"] = cache_dir
        try:
            dd = datasets.load_dataset(hub_id, cfg, **kwargs)
        except Exception as e:  # noqa: BLE001 - no network, a wrong id or config: one line, and the way out
            reason = " ".join(str(e).split())[:300]
            raise UserError(f"cannot load {hub_id!r} (config {cfg!r}) from the Hugging Face hub ({type(e).__name__}: "
                            f"{reason}); give local files with the dataset's spec.data_files "
                            "(check-grader: --data-files)") from e
        for s in dd:
            if split is not None and s != split:
                continue
            frame = dd[s].to_pandas()
            frame["_config"] = cfg
            parts.setdefault(s, []).append(frame)
    return {s: pd.concat(v, ignore_index=True) for s, v in parts.items()}


def load_source(spec: dict) -> dict[str, pd.DataFrame]:
    if spec.get("data_files") is not None:
        return load_local(spec["data_files"], spec.get("format"), spec.get("field"), spec.get("cache_dir"))
    if not spec.get("hub_id"):
        raise ValueError("spec needs either data_files or hub_id")
    return load_hub(spec["hub_id"], spec.get("hub_config"), spec.get("hub_split"), spec.get("cache_dir"))
