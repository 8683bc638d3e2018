"""A failed job's one-line cause, found from Snakemake's run log (what the console prints beside the log path)."""

from __future__ import annotations

import pytest

from grpo_budget.failures import cause, causes, job_logs

RUN_LOG = """Error in rule summary:
    message: None
    jobid: 0
    log: {a} (check log file(s) for error details)
    shell:
Error in rule train:
    log: {b}, {c} (check log file(s) for error details)
Error in rule summary:
    log: {a} (check log file(s) for error details)
"""


def test_job_logs_are_read_from_snakemakes_error_blocks_each_once():
    assert job_logs(RUN_LOG.format(a="x/a.log", b="x/b.log", c="x/c.log")) == ["x/a.log", "x/b.log", "x/c.log"]
    assert job_logs("Nothing to be done.") == []


def test_the_cause_is_the_cli_error_then_an_exception_then_the_last_line():
    cli = "loading\ngrpo-budget: error: data.csv: column 'question' is missing\n\n"
    assert cause(cli) == "grpo-budget: error: data.csv: column 'question' is missing"
    trace = 'Traceback (most recent call last):\n  File "x.py", line 1\ntorch.OutOfMemoryError: CUDA out of memory.\nbye\n'
    assert cause(trace) == "torch.OutOfMemoryError: CUDA out of memory."
    assert cause("step 1\nKilled\n") == "Killed"
    assert cause("\n \n") is None
    # the job's own command heads its log (grpo_budget.cli): never a cause, however long
    command = "grpo-budget: command: grpo-budget --record-out x --record '{\"digest\": 1}' train --settings '{}'\n"
    assert cause(command) is None and cause(command + "step 1\nKilled\n") == "Killed"


def test_causes_reads_each_jobs_log_and_says_when_it_is_missing(tmp_path):
    a, b, c = tmp_path / "a.log", tmp_path / "b.log", tmp_path / "c.log"
    a.write_text("grpo-budget: error: bad input\n")
    b.write_text("")
    run_log = tmp_path / "run.log"
    run_log.write_text(RUN_LOG.format(a=a, b=b, c=c))
    assert causes([str(run_log)]) == [f"cause ({a}): grpo-budget: error: bad input",
                                      f"cause ({b}): the log file is empty", f"cause ({c}): the log file is missing"]
    assert causes(str(run_log)) == causes([run_log]) and causes(None) == [] and causes(tmp_path / "none") == []


STOPPED_LOG = """\
[Sat Dec  5 02:12:16 2026]
localrule train:
    input: r/runs/a/subset.parquet
    log: r/logs/train/tiny_hard_s0.log
    jobid: 6
    wildcards: policy=hard
Shell command: grpo-budget train
[Sat Dec  5 02:12:16 2026]
localrule train:
    log: r/logs/train/tiny_random_s0.log
    jobid: 11
[Sat Dec  5 02:12:17 2026]
localrule evaluate:
    log: r/logs/evaluate/tiny_hard_s0_x.log
    jobid: 3
[Sat Dec  5 02:12:18 2026]
localrule select:
    log: r/logs/select/tiny_easy_s0.log
    jobid: 8
Will exit after finishing currently running jobs (scheduler).
[Sat Dec  5 02:12:31 2026]
Finished jobid: 6 (Rule: train)
1 of 19 steps (5%) done
[Sat Dec  5 02:12:31 2026]
Error in rule select:
    message: None
    jobid: 8
    output: r/subset.parquet
Finished jobid: 11 (Rule: train)
"""


def test_a_stopped_run_says_what_finished_what_was_stopped_and_what_failed():
    """Snakemake ends a run stopped by SIGTERM or Ctrl-C with "At least one job did not complete successfully"
    (exit 1) even when none failed: the report says which jobs finished (kept), which were running, which failed."""
    from grpo_budget.failures import stop_report

    assert stop_report(STOPPED_LOG, "SIGTERM") == [
        "grpo-budget: stopped by SIGTERM; failed: select tiny_easy_s0",
        "grpo-budget: finished and kept: train tiny_hard_s0, train tiny_random_s0",
        "grpo-budget: running when stopped (they run again next time): evaluate tiny_hard_s0_x",
        "grpo-budget: run the same command to continue"]
    assert stop_report(STOPPED_LOG.split("[Sat Dec  5 02:12:18")[0], "SIGINT")[0] == "grpo-budget: stopped by SIGINT; no job failed"


def test_stops_are_noted_and_handed_on_to_the_handler_before():
    import os
    import signal

    from grpo_budget import failures

    seen = []
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
        failures.watch_stops()
        os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGTERM] and failures.STOPS[-1] == "SIGTERM"
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
        assert failures.STOPS[-1] == "SIGINT"
    finally:
        for s, h in before.items():
            signal.signal(s, h)
        failures.STOPS.clear()


KILLED = '''\
import os, signal, sys
sys.stderr.write(" 43%|████▎     | 13/30 [00:41<00:52,  3.1s/it]")
sys.stderr.flush()
os.kill(os.getpid(), signal.SIG{name})
'''


@pytest.mark.parametrize("name, says", [("KILL", "killed by signal 9 (out of memory?)"),
                                        ("SEGV", "killed by signal 11 (SIGSEGV)")])
def test_a_job_killed_by_a_signal_says_so_rather_than_its_progress_bar(tmp_path, name, says):
    """A real Snakemake run whose job is killed mid-way (as the kernel's out-of-memory killer does, with SIGKILL):
    its log ends in a progress bar's fragment, which was the cause the console showed; Snakemake's run log has the
    shell's exit status (128 + the signal)."""
    import subprocess
    import sys

    (tmp_path / "job.py").write_text(KILLED.format(name=name))
    (tmp_path / "Snakefile").write_text(f'''
from grpo_budget import failures

rule job:
    output: "out.txt"
    log: "logs/job.log"
    shell: "{sys.executable} job.py > {{log}} 2>&1"

onerror:
    for line in failures.causes(log):
        print(line, file=sys.stderr)
''')
    out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1"], cwd=tmp_path, capture_output=True,
                         text=True)
    assert out.returncode != 0
    assert cause((tmp_path / "logs/job.log").read_text()).endswith("13/30 [00:41<00:52,  3.1s/it]")  # as before
    assert f"cause (logs/job.log): {says}" in out.stderr.splitlines(), out.stderr[-2000:]
