"""The script that runs inside the sandbox (stdlib only; never imported by the package: its text runs with
``python -I -S -B -c``). It reads its job (a JSON object) from stdin, limits itself, installs an audit hook, runs the
completion's code and then each test, and reports on a pipe.

Every report line starts with a nonce that only the audit hook's closure holds; the hook writes a line only for a
``sandbox.report`` event raised by :func:`_main`'s own frame (a completion calling the event, or :func:`_main` again,
is refused), and it never runs a completion's code, so no frame of it is ever below one. Whatever could reach the
closure ends the run on the spot with a ``blocked`` line: ``gc``'s object walks, tracing and profiling, other audit
hooks, other threads' frames, ``ctypes``; so are new processes and sockets. The sandbox mounts no ``/proc``. Only the
end of this script reports ``done``: an early exit, however made, leaves the run without its sentinel."""

import builtins
import json
import os
import resource
import sys


def _hook(nonce, fd, main_code, main_globals):
    """The audit hook: the only holder of the nonce."""
    write, exit_now, getframe = os.write, os._exit, sys._getframe
    denied = {"os.fork", "os.forkpty", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "subprocess.Popen",
              "pty.spawn", "os.kill", "os.killpg", "sys.settrace", "sys.setprofile", "sys.addaudithook",
              "sys._current_frames", "sys._current_exceptions", "gc.get_objects", "gc.get_referrers",
              "gc.get_referents", "mmap.__new__"}

    def emit(line):
        try:
            write(fd, (nonce + " " + line[:400].replace("\n", " ") + "\n").encode("utf-8", "replace"))
        except OSError:
            exit_now(3)  # the pipe is gone (the code closed it): no sentinel, so no pass

    def hook(event, args):
        if event == "sandbox.report":
            caller = getframe(1)
            if caller.f_code is main_code and caller.f_globals is main_globals and type(args[0]) is str:
                emit(args[0])
                return
            event = "sandbox.report from the code"
        elif not (event in denied or event.startswith(("socket.", "ctypes.", "_ctypes."))
                  or (event == "import" and type(args[0]) is str and args[0] in ("ctypes", "_ctypes"))):
            return
        emit("blocked " + event + (" " + args[0] if event == "import" else ""))
        exit_now(0)

    return hook


def _main():
    job = json.loads(sys.stdin.buffer.read())
    for name, value in job.pop("rlimits").items():
        resource.setrlimit(getattr(resource, name), (value, value))
    os.chdir(job.pop("cwd"))
    pristine = dict(builtins.__dict__)
    compile_, exec_, repr_, type_, audit, exit_now = compile, exec, repr, type, sys.audit, os._exit
    sys.addaudithook(_hook(job.pop("nonce"), job.pop("fd"), _main.__code__, globals()))

    def why(e):
        try:
            return type_(e).__name__ + ": " + str(repr_(e))[:200]
        except BaseException:  # noqa: BLE001 - a repr that raises
            return type_(e).__name__

    ns = {"__name__": "__main__", "__builtins__": dict(pristine)}
    try:
        exec_(compile_(job["code"], "solution.py", "exec"), ns)
    except BaseException as e:  # noqa: BLE001 - SystemExit too: leaving before the tests is a failure
        audit("sandbox.report", "code " + why(e))
        exit_now(0)
    tests, keep = job["tests"], job["keep"]  # keep: the names under test, even where they shadow a builtin
    for i, test in enumerate(tests):
        # A fresh copy of the builtins, and the code's names but those that shadow one: a completion that rebinds
        # `sorted`, or `builtins.sorted`, cannot change what the tests compute with.
        tns = {k: v for k, v in ns.items() if k not in pristine or k in keep}
        tns.update(__name__="__main__", __builtins__=dict(pristine))
        try:
            exec_(compile_(job["setup"] + "\n" + test, "test_%d.py" % i, "exec"), tns)
        except BaseException as e:  # noqa: BLE001
            audit("sandbox.report", "fail %d %s" % (i, why(e)))
        else:
            audit("sandbox.report", "ok %d" % i)
    audit("sandbox.report", "done %d" % len(tests))
    exit_now(0)  # no atexit handler of the code runs after the sentinel


_main()
