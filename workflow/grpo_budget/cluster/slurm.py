"""Running the workflow on a SLURM cluster.

* :func:`install_profile` links the project's ``profiles/slurm`` into Snakemake's user profile folder
  (``$XDG_CONFIG_HOME/snakemake`` or ``~/.config/snakemake``) so that ``snakemake --profile slurm`` works.
* :func:`launch` submits the Snakemake controller itself as one long, small SLURM job (through submitit),
  so the workflow keeps running after you log out; every rule is then its own SLURM job, submitted by the
  controller through ``profiles/slurm``.

``grpo-budget install-profile`` and ``grpo-budget launch`` call :func:`main_install_profile` and
:func:`main_launch`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

PROFILE_NAME = "slurm"
DEFAULT_LOG_DIR = ".snakemake/controller"


# --------------------------------------------------------------------------- locating the project


def project_root(start: Path | str | None = None) -> Path:
    """The grpo-budget checkout: the first of ``start`` (default: the current directory) and its parents
    that holds ``profiles/slurm/config.yaml``, else the checkout this package lives in."""
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "profiles" / PROFILE_NAME / "config.yaml").is_file():
            return d
    pkg_root = Path(__file__).resolve().parents[3]  # workflow/grpo_budget/cluster/slurm.py -> checkout
    if (pkg_root / "profiles" / PROFILE_NAME / "config.yaml").is_file():
        return pkg_root
    raise FileNotFoundError(
        f"no profiles/{PROFILE_NAME}/config.yaml in {here} or its parents, nor next to the installed package; "
        "run this from the grpo-budget checkout"
    )


def profile_dir(start: Path | str | None = None) -> Path:
    """The project's ``profiles/slurm`` folder."""
    return project_root(start) / "profiles" / PROFILE_NAME


def user_profile_home() -> Path:
    """Where Snakemake looks for named profiles of this user (platformdirs' user config dir on Linux)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "snakemake"


# --------------------------------------------------------------------------- install-profile


def install_profile(name: str = PROFILE_NAME, force: bool = False, *, source: Path | str | None = None) -> Path:
    """Symlink the project's ``profiles/slurm`` to ``$XDG_CONFIG_HOME/snakemake/<name>`` and return the link.

    Idempotent: an existing link to the same folder is kept.  Anything else already at that place is left
    alone (FileExistsError) unless ``force``, in which case a link is replaced and a real file or folder is
    moved aside to ``<name>.bak-<timestamp>``, never deleted.
    """
    src = Path(source).resolve() if source is not None else profile_dir().resolve()
    if not (src / "config.yaml").is_file():
        raise FileNotFoundError(f"{src} has no config.yaml")
    dest = user_profile_home() / name
    if dest.is_symlink() and dest.resolve() == src:
        return dest
    if dest.is_symlink() or dest.exists():
        if not force:
            what = f"a link to {os.readlink(dest)}" if dest.is_symlink() else "a file or folder"
            raise FileExistsError(f"{dest} is already {what}; use --force to replace it")
        if dest.is_symlink():
            dest.unlink()
        else:
            backup = dest.with_name(f"{dest.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}")
            shutil.move(str(dest), str(backup))
            print(f"moved the old {dest} to {backup}", file=sys.stderr)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.symlink_to(src, target_is_directory=True)
    return dest


def main_install_profile(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="grpo-budget install-profile",
        description="Link this project's profiles/slurm into Snakemake's user profile folder "
        "($XDG_CONFIG_HOME/snakemake, default ~/.config/snakemake), so that "
        "`snakemake --profile slurm` works from the project root.",
    )
    p.add_argument("--name", default=PROFILE_NAME, help="profile name to install as (default: %(default)s)")
    p.add_argument("--force", action="store_true", help="replace what is already installed under that name")
    a = p.parse_args(argv)
    try:
        dest = install_profile(a.name, a.force)
    except (FileExistsError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{dest} -> {os.readlink(dest)}")
    print(f"now, from {project_root()}:  snakemake --profile {a.name} <target>")
    return 0


# --------------------------------------------------------------------------- launch


class SnakemakeController:
    """What the controller SLURM job runs: ``python -m snakemake <args>`` in ``workdir``; picklable.

    Snakemake's output goes straight to the job's stdout log.  A non-zero exit raises, so submitit marks the
    job failed.  SIGUSR2 (submitit's pre-timeout signal, sent by SLURM to every process of the job) is
    ignored in Snakemake, which would otherwise die of it without cancelling its jobs.  SIGTERM (scancel of
    the controller, its time limit) is turned into SIGINT for Snakemake: on SIGTERM alone Snakemake only
    stops submitting and waits for the running jobs, and SLURM kills it 30 s later (KillWait) with its jobs
    left running; on SIGINT it scancels its jobs first.
    """

    def __init__(self, snakemake_args: Sequence[str], workdir: Path | str, env: Mapping[str, str] | None = None,
                 python: str | None = None) -> None:
        self.snakemake_args = list(snakemake_args)
        self.workdir = str(workdir)
        self.env = dict(env or {})
        self.python = python or sys.executable

    def command(self) -> list[str]:
        return [self.python, "-m", "snakemake", *self.snakemake_args]

    def __call__(self) -> int:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}  # the plugin does the same
        env.update(self.env)
        print(f"grpo-budget controller on {os.uname().nodename} in {self.workdir}:\n  {shlex.join(self.command())}",
              flush=True)
        proc = subprocess.Popen(self.command(), cwd=self.workdir, env=env,
                                preexec_fn=lambda: signal.signal(signal.SIGUSR2, signal.SIG_IGN))

        def interrupt(signum, frame):  # scancel of the controller: stop like Ctrl-C, i.e. cancel the jobs
            print(f"controller got signal {signum}: interrupting snakemake (it cancels its SLURM jobs)", flush=True)
            # SLURM sends SIGTERM to snakemake itself too; Snakemake's SIGTERM handler takes a lock, and a
            # SIGINT landing in the middle of it can leave Snakemake stuck: let that handler finish first.
            for delay in (2.0, 12.0):
                threading.Timer(delay, lambda: proc.poll() is None and proc.send_signal(signal.SIGINT)).start()

        previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            rc = proc.wait()
        except BaseException:
            proc.send_signal(signal.SIGINT)
            proc.wait()
            raise
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        if rc != 0:
            raise RuntimeError(f"snakemake exited with status {rc}")
        return rc

    def __repr__(self) -> str:
        return f"SnakemakeController({shlex.join(self.command())})"


def launch(
    snakemake_args: Sequence[str],
    *,
    partition: str | None = None,
    account: str | None = None,
    time_min: int = 3 * 24 * 60,
    mem_gb: float = 4,
    cpus: int = 1,
    log_dir: Path | str = DEFAULT_LOG_DIR,
    profile: str | Path | None = None,
    workdir: Path | str | None = None,
    job_name: str = "grpo-budget-controller",
    env: Mapping[str, str] | None = None,
    slurm_additional_parameters: Mapping[str, object] | None = None,
):
    """Submit ``snakemake --profile <profile> <snakemake_args>`` as one SLURM job and return the submitit Job.

    ``partition``/``account``: where the controller job itself runs (``None``: cluster default).  The
    account is also handed to the workflow's jobs through ``GRPO_SLURM_ACCOUNT`` unless that is already
    set (see profiles/slurm/config.yaml).  ``profile`` defaults to the project's profiles/slurm (absolute
    path, so it need not be installed).  ``log_dir`` (relative to ``workdir``) receives submitit's
    ``<jobid>_0_log.out`` with Snakemake's whole output.  Prints the job id and log path.
    """
    import submitit

    workdir = Path(workdir).resolve() if workdir is not None else project_root()
    if profile is None:
        profile = profile_dir(workdir)
    args = list(snakemake_args)
    if "--profile" not in args and not any(a.startswith("--profile=") for a in args):
        args = ["--profile", str(profile), *args]
    job_env = dict(env or {})
    if account and "GRPO_SLURM_ACCOUNT" not in os.environ and "GRPO_SLURM_ACCOUNT" not in job_env:
        job_env["GRPO_SLURM_ACCOUNT"] = account

    log_dir = Path(log_dir)
    if not log_dir.is_absolute():
        log_dir = workdir / log_dir
    executor = submitit.AutoExecutor(folder=log_dir, cluster="slurm")
    params: dict[str, object] = {
        "name": job_name,
        "timeout_min": int(time_min),
        "mem_gb": mem_gb,
        "cpus_per_task": int(cpus),
        "tasks_per_node": 1,
        "nodes": 1,
        "slurm_stderr_to_stdout": True,  # one log with all of snakemake's output
        "slurm_additional_parameters": {"chdir": str(workdir), **dict(slurm_additional_parameters or {})},
    }
    if partition:
        params["slurm_partition"] = partition
    if account:
        params["slurm_account"] = account
    executor.update_parameters(**params)
    job = executor.submit(SnakemakeController(args, workdir, job_env))
    print(f"submitted controller job {job.job_id}: snakemake {shlex.join(args)}")
    print(f"log: {job.paths.stdout}")
    print(f"follow: tail -f {shlex.quote(str(job.paths.stdout))}    stop: scancel {job.job_id}")
    return job


def _launch_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="grpo-budget launch",
        allow_abbrev=False,
        description="Run the Snakemake controller itself as a long, small SLURM job (via submitit); it "
        "submits every rule as its own SLURM job through profiles/slurm.  Everything after the options "
        "that it does not know, and everything after --, goes to snakemake, e.g.:\n"
        "  grpo-budget launch --account X -- --configfile my.yaml results/summary.csv",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--partition", default=os.environ.get("GRPO_SLURM_CONTROLLER_PARTITION"),
                   help="partition of the controller job (default: $GRPO_SLURM_CONTROLLER_PARTITION, "
                   "else the cluster's default)")
    p.add_argument("--account", default=os.environ.get("GRPO_SLURM_ACCOUNT"),
                   help="SLURM account (default: $GRPO_SLURM_ACCOUNT); also used by the workflow's jobs")
    p.add_argument("--time", dest="time_min", type=int, default=3 * 24 * 60,
                   help="time limit of the controller in minutes (default: %(default)s)")
    p.add_argument("--mem", dest="mem_gb", type=float, default=4, help="memory in GB (default: %(default)s)")
    p.add_argument("--cpus", type=int, default=1, help="CPUs (default: %(default)s)")
    p.add_argument("--log-dir", default=DEFAULT_LOG_DIR, help="submitit folder (default: %(default)s)")
    p.add_argument("--profile", dest="profile", default=None,
                   help="Snakemake profile (default: the project's profiles/slurm)")
    p.add_argument("--workdir", default=None, help="project root to run in (default: found from here)")
    p.add_argument("--wait", action="store_true", help="wait for the controller to finish; exit with its status")
    return p


def main_launch(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = _launch_parser()
    if "--" in argv:  # unambiguous: ours before, snakemake's after
        i = argv.index("--")
        a, smk = p.parse_args(argv[:i]), argv[i + 1:]
    else:  # options we do not know, and all positionals, go to snakemake
        a, smk = p.parse_known_args(argv)
    try:
        job = launch(smk, partition=a.partition, account=a.account, time_min=a.time_min, mem_gb=a.mem_gb,
                     cpus=a.cpus, log_dir=a.log_dir, profile=a.profile, workdir=a.workdir)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if not a.wait:
        return 0
    try:
        job.result()
    except Exception as e:  # submitit re-raises the controller's failure
        print(f"controller job {job.job_id} failed: {e}\nlog: {job.paths.stdout}", file=sys.stderr)
        return 1
    print(f"controller job {job.job_id} finished")
    return 0
