"""A failed run's causes, one line per failed job, for the console: Snakemake prints only its generic error block
and the job's log path, while the cause (the CLI's one-line error, or a traceback's last line) is inside that log."""

from __future__ import annotations

import re
from pathlib import Path

ERROR_PREFIX = "grpo-budget: error:"  # the CLI's one line for a user's mistake (grpo_budget.cli.main)
# Snakemake's error block names each failed job's log files on one line.
LOG_LINE = re.compile(r"^\s*log: (.+?) \(check log file\(s\) for error details\)\s*$", re.M)
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b.*$")


def job_logs(run_log: str) -> list[str]:
    """The log files of the failed jobs that Snakemake's run log (its text) names, in order, each once."""
    found: list[str] = []
    for m in LOG_LINE.finditer(run_log):
        for path in m.group(1).split(", "):
            if path not in found:
                found.append(path)
    return found


def cause(job_log: str) -> str | None:
    """A job log's one-line cause: the CLI's error line, else a traceback's last exception line, else its last
    line (None for an empty log)."""
    lines = [line.rstrip() for line in job_log.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith(ERROR_PREFIX):
            return line
    for line in reversed(lines):
        if EXCEPTION_LINE.match(line):
            return line
    return lines[-1] if lines else None


def causes(run_logs: str | Path | list | None) -> list[str]:
    """``cause (LOG): LINE`` for each failed job named in Snakemake's run log(s) (a path or a list of paths, as its
    ``onerror`` handler receives them; nothing when they cannot be read)."""
    paths = run_logs if isinstance(run_logs, (list, tuple)) else [run_logs] if run_logs else []
    text = ""
    for path in paths:
        try:
            text += Path(path).read_text(errors="replace")
        except OSError:
            pass
    out = []
    for path in job_logs(text):
        try:
            line = cause(Path(path).read_text(errors="replace"))
        except OSError:
            line = "the log file is missing"
        out.append(f"cause ({path}): {line or 'the log file is empty'}")
    return out
