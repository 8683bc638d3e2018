"""A failed job's one-line cause, found from Snakemake's run log (what the console prints beside the log path)."""

from __future__ import annotations

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


def test_causes_reads_each_jobs_log_and_says_when_it_is_missing(tmp_path):
    a, b, c = tmp_path / "a.log", tmp_path / "b.log", tmp_path / "c.log"
    a.write_text("grpo-budget: error: bad input\n")
    b.write_text("")
    run_log = tmp_path / "run.log"
    run_log.write_text(RUN_LOG.format(a=a, b=b, c=c))
    assert causes([str(run_log)]) == [f"cause ({a}): grpo-budget: error: bad input",
                                      f"cause ({b}): the log file is empty", f"cause ({c}): the log file is missing"]
    assert causes(str(run_log)) == causes([run_log]) and causes(None) == [] and causes(tmp_path / "none") == []
