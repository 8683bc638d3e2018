"""A failed run's causes, one line per failed job, for the console: Snakemake prints only its generic error block
and the job's log path, while the cause (the CLI's one-line error, or a traceback's last line) is inside that log."""

from __future__ import annotations

import re
import signal
from pathlib import Path

ERROR_PREFIX = "grpo-budget: error:"  # the CLI's one line for a user's mistake (grpo_budget.cli.main)
COMMAND_PREFIX = "grpo-budget: command: "  # a job log's first line: the command that ran (grpo_budget.cli.main)
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
    lines = [line.rstrip() for line in job_log.splitlines() if line.strip() and not line.startswith(COMMAND_PREFIX)]
    for line in reversed(lines):
        if line.startswith(ERROR_PREFIX):
            return line
    for line in reversed(lines):
        if EXCEPTION_LINE.match(line):
            return line
    return lines[-1] if lines else None


def read_logs(run_logs: str | Path | list | None) -> str:
    """The text of Snakemake's run log(s): a path or a list of paths, as its handlers receive them ('' when they
    cannot be read)."""
    paths = run_logs if isinstance(run_logs, (list, tuple)) else [run_logs] if run_logs else []
    text = ""
    for path in paths:
        try:
            text += Path(path).read_text(errors="replace")
        except OSError:
            pass
    return text


# Snakemake's line for a job's shell command that failed: its exit status, or the signal that ended the shell.
COMMAND_LINE = re.compile(r"^Command '(.*)' (?:returned non-zero exit status (\d+)|died with <Signals\.\w+: (\d+)>)",
                          re.M)


def signalled(run_log: str, job_log: str) -> int | None:
    """The signal that ended the failed job whose log is ``job_log``, from its command's line in Snakemake's run
    log: the shell reports a child ended by signal N as exit status 128 + N."""
    for command, status, signum in COMMAND_LINE.findall(run_log):
        if job_log in command:
            number = int(signum) if signum else int(status) - 128
            return number if number > 0 else None
    return None


def killed(number: int) -> str:
    """What a job ended by signal ``number`` says: the kernel's out-of-memory killer and a cluster's memory limit
    send SIGKILL, which no process can catch or report itself."""
    if number == signal.SIGKILL:
        return f"killed by signal {number} (out of memory?)"
    try:
        return f"killed by signal {number} ({signal.Signals(number).name})"
    except ValueError:
        return f"killed by signal {number}"


def causes(run_logs: str | Path | list | None) -> list[str]:
    """``cause (LOG): LINE`` for each failed job named in Snakemake's run log(s) (a path or a list of paths, as its
    ``onerror`` handler receives them; nothing when they cannot be read). A job ended by a signal says so: its log's
    last line is only where it was (a progress bar's fragment)."""
    out = []
    run_log = read_logs(run_logs)
    for path in job_logs(run_log):
        number = signalled(run_log, path)
        if number is not None:
            line = killed(number)
        else:
            try:
                line = cause(Path(path).read_text(errors="replace"))
            except OSError:
                line = "the log file is missing"
        out.append(f"cause ({path}): {line or 'the log file is empty'}")
    return out


# A job's block in Snakemake's run log: its rule, then (indented) its jobid and log; the line of its end.
JOB_BLOCK = re.compile(r"^(?:local)?rule (\w+):\n((?:    .*\n)+)", re.M)
FINISHED = re.compile(r"^Finished jobid: (\d+) ", re.M)
FAILED = re.compile(r"^Error in rule \w+:\n(?:    .*\n)*?    jobid: (\d+)", re.M)
STOPS: list[str] = []  # the signals that stopped this run (watch_stops)


def watch_stops() -> None:
    """Note SIGTERM and SIGINT before Snakemake's own handling (it lets running jobs finish, or cancels them, and
    then reports a failure): ``stop_report`` then says what happened."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)

        def noted(signum, frame, previous=previous):
            STOPS.append(signal.Signals(signum).name)
            if callable(previous):
                previous(signum, frame)
            elif signum == signal.SIGINT:
                raise KeyboardInterrupt

        signal.signal(sig, noted)


def stop_report(run_log: str, signal_name: str) -> list[str]:
    """What a run stopped by ``signal_name`` did, from Snakemake's run log (its text): which jobs finished (kept),
    which were running when it stopped (they run again next time), which failed; Snakemake's own last line says
    only that a job did not complete."""
    jobs = {}
    for rule, body in JOB_BLOCK.findall(run_log):
        fields = dict(re.findall(r"^    (\w+): (.*)$", body, re.M))
        if "jobid" in fields and rule != "all":
            jobs[fields["jobid"]] = f"{rule} {Path(fields.get('log', rule)).stem}" if fields.get("log") else rule
    finished = [jobs[j] for j in FINISHED.findall(run_log) if j in jobs]
    failed = [jobs[j] for j in FAILED.findall(run_log) if j in jobs]
    running = [name for j, name in jobs.items() if name not in finished and name not in failed]
    lines = [f"grpo-budget: stopped by {signal_name}; " + ("no job failed" if not failed else
                                                          f"failed: {', '.join(failed)}")]
    lines.append(f"grpo-budget: finished and kept: {', '.join(finished) or 'none'}")
    if running:
        lines.append(f"grpo-budget: running when stopped (they run again next time): {', '.join(running)}")
    lines.append("grpo-budget: run the same command to continue")
    return lines
