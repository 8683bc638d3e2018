"""Run untrusted code with its tests in a sandbox: one fresh process tree per run, in its own namespaces.

Each run is ``setpriv --pdeathsig KILL`` (it dies with the grader's thread) → ``unshare`` (new user, network, mount
and PID namespaces; ``--kill-child``) → a shell whose one ``mount -a`` (its table in a memfd) builds a private root
over the package's folder of empty mount points (read-only, ``/usr`` read-only, ``/dev/null`` and ``/dev/urandom``,
a size-capped ``/work`` tmpfs: the run's working directory; nothing is written to the host's disk) → ``chroot`` →
``setpriv`` (no capabilities, no new privileges) → the system Python running the harness
(:mod:`sandbox_harness`, :mod:`sandbox_worker` and :mod:`sandbox_wire`, joined into one text). The harness is two
processes: the checker (the PID namespace's init) runs the tests and reports on a pipe with a nonce; the worker,
forked from it before the tests arrive, runs the code and answers the checker's calls with values. Whatever the
code does, it changes only what its functions return; whatever it starts dies with the namespace when the checker
exits, and the checker exits when the grader closes its stdin or dies, or at the wall time.

Where the machine refuses user namespaces the sandbox refuses to run (:func:`problem` says why; ``grpo-budget
doctor`` reports it). The limits and what each adversarial completion meets: docs/sandbox.md.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from grpo_budget.errors import UserError

# The harness: its three files as one program (the lines that import one part from another are the joins).
HARNESS = "\n".join(line for part in ("sandbox_wire", "sandbox_worker", "sandbox_harness")
                    for line in Path(__file__).with_name(part + ".py").read_text().splitlines()
                    if not line.startswith("from sandbox_"))
WORKDIR = "/work"  # the code's working directory and HOME inside the sandbox
# The root every run mounts over, read-only, in its own mount namespace: empty mount points shipped with the package
# (so no run writes anything to the host's disk: a killed grader leaves nothing behind).
ROOT = str(Path(__file__).with_name("sandbox_root"))

# Mounts the private root (one `mount -a` over the table in memfd $1: the root itself read-only, /usr read-only and
# the host's top-level links into it, two device nodes, a fresh /work tmpfs) and runs $5 (the sandbox's Python) with
# the harness $6 in it; $7, the harness's one argument, names the grader's process (so every process of its runs can
# be told by its command line). It runs as root of the new user namespace, so the mounts are its own and vanish with
# it. No /proc: nothing of the harness's memory is exposed.
_SETUP = ('mount -a -T "/dev/fd/$1" && exec "$2" "$3" "$4" --no-new-privs --bounding-set=-all --inh-caps=-all -- '
          '"$5" -I -S -B -c "$6" "$7"')


@dataclass(frozen=True)
class Limits:
    """What one run may use (docs/sandbox.md)."""

    cpu_seconds: int = 5  # RLIMIT_CPU, of each of the checker and the worker: SIGXCPU, a second later SIGKILL
    wall_seconds: float = 10.0  # the process group is killed after this
    memory_mb: int = 512  # RLIMIT_AS: allocations beyond it raise MemoryError
    processes: int = 8  # RLIMIT_NPROC (within the run's own user namespace); fork is also refused outright
    open_files: int = 64  # RLIMIT_NOFILE
    file_size_mb: int = 8  # RLIMIT_FSIZE: the largest file it may write
    disk_mb: int = 16  # the size of its /work tmpfs: everything it may write, together
    output_kb: int = 256  # stdout + stderr together; more kills the run

    def rlimits(self) -> dict[str, int]:
        return {"RLIMIT_CPU": self.cpu_seconds, "RLIMIT_AS": self.memory_mb << 20, "RLIMIT_NPROC": self.processes,
                "RLIMIT_NOFILE": self.open_files, "RLIMIT_FSIZE": self.file_size_mb << 20, "RLIMIT_CORE": 0}


@dataclass(frozen=True)
class Outcome:
    """What a run proved: ``passed`` of ``total`` tests reported passing, ``done`` when the sentinel arrived."""

    passed: int
    total: int
    done: bool
    reason: str | None  # why it is not a full pass (None for a pass)
    seconds: float

    @property
    def ok(self) -> bool:
        return self.done and self.total > 0 and self.passed == self.total

    @property
    def share(self) -> float:
        return self.passed / self.total if self.total else 0.0


def _executable(name: str, candidates: Sequence[str]) -> str | None:
    for c in candidates:
        path = os.path.realpath(c) if c else ""
        if path.startswith("/usr/") and os.access(path, os.X_OK):
            return path  # only /usr is inside the sandbox
    found = shutil.which(name, path="/usr/bin:/usr/sbin:/usr/local/bin")
    return os.path.realpath(found) if found else None


@lru_cache(maxsize=1)
def tools() -> dict[str, str | None]:
    """The programs a run needs: unshare, sh, chroot (outside), setpriv and a Python 3 under /usr (inside)."""
    base = getattr(sys, "_base_executable", sys.executable)
    return {"unshare": shutil.which("unshare"), "sh": shutil.which("sh"), "chroot": shutil.which("chroot"),
            "mount": shutil.which("mount"), "setpriv": _executable("setpriv", ["/usr/bin/setpriv"]),
            "python": _executable("python3", [base, "/usr/bin/python3", "/usr/local/bin/python3"])}


@lru_cache(maxsize=1)
def problem() -> str | None:
    """Why code cannot run sandboxed here (None: it can); probed once per process by running one trivial test."""
    missing = [name for name, path in tools().items() if not path]
    if missing:
        return f"missing {', '.join(missing)} (util-linux, coreutils and a python3 under /usr are needed)"
    out = _run(Job("x = 1\n", ("assert x == 1",)), Limits())
    if not out.ok:
        return f"a trivial test did not pass in the sandbox ({out.reason})"
    return None


def require() -> None:
    """Refuse (:class:`UserError`) where code cannot run sandboxed: never run it unconfined instead."""
    why = problem()
    if why:
        raise UserError(f"code grading needs the sandbox (user, network, mount and PID namespaces via unshare), "
                        f"which this machine refuses: {why}; run on a machine that allows unprivileged user "
                        "namespaces (grpo-budget doctor checks)")


@dataclass(frozen=True)
class Job:
    """Code to run, then each test (``setup`` run in the code's names before each); ``keep``: the names under test,
    the code's even where they shadow a builtin; ``prefix``: the item's prompt, run in the tests' names so that the
    helpers it defines are the item's own, never the code's."""

    code: str
    tests: tuple[str, ...]
    setup: str = ""
    keep: tuple[str, ...] = ()
    prefix: str = ""


def run(job: Job, limits: Limits = Limits()) -> Outcome:
    """Run one job in a fresh sandbox."""
    require()
    return _run(job, limits)


def run_many(jobs: Sequence[Job], limits: Limits = Limits(), threads: int | None = None) -> list[Outcome]:
    """:func:`run` over ``jobs``, ``threads`` sandboxes at a time (default: the CPUs this process may use)."""
    require()
    if not jobs:
        return []
    threads = threads or len(os.sched_getaffinity(0))
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(jobs)))) as pool:
        return list(pool.map(lambda j: _run(j, limits), jobs))


def _fstab(path: str) -> str:
    return path.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011").replace("\n", "\\012")


@lru_cache(maxsize=4)
def _table(disk_mb: int) -> int:
    """:data:`_SETUP`'s mount table, in a memfd this process holds (nothing on disk to leave behind)."""
    root = _fstab(ROOT)
    links = "".join(f"{_fstab(os.path.realpath('/' + n))} {root}/{n} none bind,ro 0 0\n"
                    for n in ("bin", "lib", "lib64", "sbin")
                    if os.path.islink("/" + n) and os.path.realpath("/" + n).startswith("/usr/"))
    table = (f"{root} {root} none bind,ro 0 0\n/usr {root}/usr none rbind,ro 0 0\n{links}"
             f"/dev/null {root}/dev/null none bind 0 0\n/dev/urandom {root}/dev/urandom none bind 0 0\n"
             f"grpo-sandbox-work {root}{WORKDIR} tmpfs size={disk_mb}m,mode=777,nosuid,nodev,noexec 0 0\n")
    fd = os.memfd_create("grpo-sandbox-fstab")
    os.write(fd, table.encode())
    return fd


def marker(pid: int | None = None) -> str:
    """The argument every process of the sandboxes of grader process ``pid`` (default: this one) carries."""
    return f"grpo-sandbox-of-{os.getpid() if pid is None else pid}"


def _frame(message: dict) -> bytes:
    data = json.dumps(message).encode()
    return len(data).to_bytes(4, "big") + data


def _run(job: Job, limits: Limits) -> Outcome:
    t = tools()
    start = time.monotonic()
    nonce = secrets.token_hex(16)
    table = _table(limits.disk_mb)
    rfd, wfd = os.pipe()
    # two messages: what the worker may know (it is forked after the first), then the tests and the report pipe
    payload = (_frame({"cwd": WORKDIR, "rlimits": limits.rlimits(), "code": job.code, "setup": job.setup})
               + _frame({"nonce": nonce, "fd": wfd, "tests": list(job.tests), "keep": list(job.keep),
                         "prefix": job.prefix, "setup": job.setup, "wall": limits.wall_seconds + 1}))
    env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": WORKDIR, "TMPDIR": WORKDIR, "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
    cmd = [t["setpriv"], "--pdeathsig", "KILL", "--", t["unshare"], "--user", "--map-root-user", "--net", "--mount",
           "--pid", "--fork", "--kill-child", "--", t["sh"], "-c", _SETUP, "sandbox-setup", str(table), t["chroot"], ROOT,
           t["setpriv"], t["python"], HARNESS, marker()]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                pass_fds=(wfd, table), env=env, cwd="/", start_new_session=True)
    except BaseException:
        os.close(rfd), os.close(wfd)
        raise
    os.close(wfd)
    cpu = 0.0
    try:
        output, reports, cut = _collect(proc, rfd, payload, start, limits)
    finally:
        cpu = _kill(proc)
        os.close(rfd)
    return _outcome(nonce, reports, output, cut, proc.returncode, cpu, len(job.tests), limits,
                    time.monotonic() - start)


def _collect(proc: subprocess.Popen, rfd: int, payload: bytes, start: float, limits: Limits
             ) -> tuple[bytes, bytes, str | None]:
    """The run's output and reports, read with caps until both pipes close; the reason it was cut short, if so.
    Its stdin stays open (the checker's lifeline) until :func:`_kill`."""
    try:
        proc.stdin.write(payload)
        proc.stdin.flush()
    except OSError:
        pass  # it died before reading its job: its output says why
    cap = limits.output_kb << 10
    bufs = {proc.stdout.fileno(): bytearray(), rfd: bytearray()}
    sel = selectors.DefaultSelector()
    for fd in bufs:
        sel.register(fd, selectors.EVENT_READ)
    cut = None
    try:
        while sel.get_map() and cut is None:
            left = limits.wall_seconds - (time.monotonic() - start)
            if left <= 0:
                cut = f"timed out after {limits.wall_seconds:g} s of wall time (killed)"
                break
            for key, _ in sel.select(timeout=left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                bufs[key.fd] += chunk
                if len(bufs[key.fd]) > cap:
                    cut = f"wrote more than {limits.output_kb} KiB of output (killed)"
    finally:
        sel.close()
    return bytes(bufs[proc.stdout.fileno()]), bytes(bufs[rfd]), cut


def _kill(proc: subprocess.Popen, grace: float = 1.0) -> float:
    """End the run and wait until nothing of it is left; the CPU seconds it used (unshare waits for its child, so
    its usage includes the code's). Closing the checker's stdin ends the checker, and with it, as the PID
    namespace's init, every process in the sandbox before unshare can exit; a run that has not ended within
    ``grace`` seconds (stuck before its checker started, say) has its process group killed."""
    try:
        proc.stdin.close()
    except OSError:
        pass
    deadline, status, usage = time.monotonic() + grace, None, None
    try:
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.002)
        proc.returncode = os.waitstatus_to_exitcode(status)
    except ChildProcessError:  # reaped elsewhere
        usage = None
    proc.wait()
    proc.stdout.close()
    return usage.ru_utime + usage.ru_stime if usage else 0.0


def _outcome(nonce: str, reports: bytes, output: bytes, cut: str | None, code: int | None, cpu: float, total: int,
             limits: Limits, seconds: float) -> Outcome:
    passed, done, first = 0, False, None
    for line in reports.decode("utf-8", "replace").splitlines():
        head, _, rest = line.partition(" ")
        if head != nonce:
            continue  # not the harness's (the code can write to the pipe, but cannot know the nonce)
        kind, _, detail = rest.partition(" ")
        if kind == "ok":
            passed += 1
        elif kind == "done":
            done = True
        elif first is None:
            first = {"blocked": f"blocked {detail}", "code": f"the code raised {detail} before the tests",
                     "fail": "test " + detail.replace(" ", ": ", 1), "gone": f"the code's process {detail}"}.get(kind, rest)
    if done and passed == total and total and not cut:
        return Outcome(passed, total, True, None, seconds)
    reason = cut or first
    if reason is None and not done:  # the checker itself ended early (its CPU time, or the sandbox did not start)
        reason = (f"used its {limits.cpu_seconds} s of CPU time (killed)" if cpu >= 0.95 * limits.cpu_seconds
                  else _death(code, output, limits))
    return Outcome(passed, total, done and not cut, reason or "no tests", seconds)


def _death(code: int | None, output: bytes, limits: Limits) -> str:
    """Why a run ended without its sentinel: a signal, an early exit, or a sandbox that did not start."""
    if code is not None and code < 0:
        sig = signal.Signals(-code).name
        why = f" (CPU limit {limits.cpu_seconds} s)" if sig == "SIGXCPU" else ""
        return f"killed by {sig}{why} before the end of the tests"
    tail = " ".join(output.decode("utf-8", "replace").split())[-200:]
    if "sigprocmask unblock failed" in tail:  # unshare could not re-raise the signal that ended its child
        return f"killed by a signal before the end of the tests, most likely its CPU limit of {limits.cpu_seconds} s"
    return f"exited with code {code} before the end of the tests (no sentinel){': ' + tail if tail else ''}"


def describe(limits: Limits = Limits()) -> str:
    """The limits as one line (for logs and ``doctor``)."""
    return ", ".join(f"{k} {v:g}" for k, v in asdict(limits).items())
