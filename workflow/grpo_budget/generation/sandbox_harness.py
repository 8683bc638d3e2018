"""The program that runs inside the sandbox (stdlib only; never imported by the package: its text runs with
``python -I -S -B -c``) as two processes, so that the verdict is decided where the completion's code cannot reach.

- The *checker* is the sandbox's PID-namespace init. It reads the code and the limits (the first message on stdin),
  limits itself and forks the *worker*, makes itself undumpable (no ptrace or memory reads by the worker), and only
  then reads the tests, the report pipe and its nonce (the second message). It never runs a line of the completion:
  it runs each test (and the item's prompt, whose helpers the tests may call) in its own fresh builtins, and decides
  and reports each outcome on the pipe.
- The *worker* closes every descriptor but its two request and reply pipes, installs an audit hook and runs the
  completion's code. It answers the checker's requests: a name of the code's, a call, an iteration, a ``len``,
  ``bool`` or ``str``. Built-in data (None, bool, int, float, complex, str, bytes, list, tuple, dict, set and
  collections' Counter, OrderedDict, defaultdict and deque) crosses by value, rebuilt in the checker as exactly those
  types (a subclass crosses as its base type's value); anything else crosses as a handle that equals only itself.
  So an object with its own ``__eq__`` can never pass as a string, a number or a list, and whatever the worker does
  to itself (rebinding builtins, walking its frames, threads) changes no test's outcome.

The checker's stdin stays open until the grader is done with the run: its end (the grader killed) or the wall time
ends the checker at once, and with it, as PID 1, every process of the sandbox."""

import builtins
import os
import resource
import select
import sys
import time
import _signal
import _thread

from sandbox_wire import NAMED, decode, encode, recv, send, why  # joined: the harness is one text (sandbox.py)
from sandbox_worker import worker  # joined

# signal names (the signal module, with enum, would double the harness's start-up)
SIGNALS = {v: k for k, v in vars(_signal).items() if k[:3] == "SIG" and k[3] != "_" and k not in ("SIGIOT", "SIGCLD",
                                                                                                   "SIGPOLL")}


# What the worker may answer to each request (besides "err"); anything else is refused.
ANSWERS = {"exec": ("ok",), "setup": ("ok",), "name": ("val", "missing", "module"), "next": ("val", "stop"),
           "call": ("val",), "iter": ("val",), "len": ("val",), "bool": ("val",), "str": ("val",)}


class CodeGone(BaseException):
    """The worker ended (exited, was killed, or was stopped by its audit hook): no later test can pass."""


class CodeError(Exception):
    """An exception of the code's that is not a built-in Exception (or is StopIteration), by name."""


class CodeExit(BaseException):
    """A SystemExit, KeyboardInterrupt or GeneratorExit the code raised during a call."""


class Checker:
    """The checker's end of the pipes: each request to the worker, its answer checked and decoded (built-in data as
    itself, anything else as a :class:`Remote`), and how the worker ended, reported once."""

    def __init__(self, req, resp, pid, emit, limits):
        self.req, self.resp, self.pid, self.emit, self.limits = req, resp, pid, emit, limits
        self.gone, self.where, self.remotes = None, "before the tests", {}

    def fate(self):
        """How the worker ended, in words (one that stopped answering but lives on is killed)."""
        for _ in range(50):
            pid, status, usage = os.wait4(self.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.01)
        else:
            os.kill(self.pid, _signal.SIGKILL)
            os.wait4(self.pid, 0)
            return "stopped answering (killed)"
        cpu, limit = usage.ru_utime + usage.ru_stime, self.limits.get("RLIMIT_CPU", 0)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (_signal.SIGXCPU, _signal.SIGKILL) and cpu >= 0.8 * limit:
            return "was killed at its CPU limit of %d s" % limit  # SIGXCPU at the limit, SIGKILL a second later
        if os.WIFSIGNALED(status):
            return "was killed by %s" % SIGNALS.get(os.WTERMSIG(status), "signal %d" % os.WTERMSIG(status))
        return "exited with code %d" % os.waitstatus_to_exitcode(status)

    def rpc(self, *request):
        """One request to the worker and its answer; a CodeGone once it has ended."""
        if self.gone:
            raise CodeGone(self.gone)
        try:
            send(self.req, list(request))
            reply = recv(self.resp)
        except (EOFError, OSError):  # it ended, or closed its pipes
            reply = None
        except BaseException:  # noqa: BLE001 - an answer that is not one
            reply = []
        if reply is None:
            self.gone = self.fate() + " " + self.where
        elif type(reply) is not list or not reply or type(reply[0]) is not str:
            os.kill(self.pid, _signal.SIGKILL)
            self.gone = "answered with something that is not a value " + self.where + " (killed)"
        elif reply[0] == "blocked" and len(reply) == 2 and type(reply[1]) is str:
            self.gone = "was stopped: blocked " + reply[1]
            self.emit("blocked " + reply[1])
        if self.gone:
            if not self.gone.startswith("was stopped"):
                self.emit("gone " + self.gone)
            raise CodeGone(self.gone)
        kind = reply[0]
        if kind == "err" and len(reply) == 3 and type(reply[1]) is str and type(reply[2]) is str:
            raise self.error(reply[1], reply[2])
        if kind in ANSWERS[request[0]] and len(reply) == (2 if kind in ("val", "module") else 1):
            return reply
        # an answer this request cannot have (a "stop" to a call would end a test's map() early): the worker
        # wrote on its pipe itself
        raise CodeError("a malformed answer from the code's process")

    def error(self, name, text):
        """The checker's own exception for one the code raised (a built-in Exception by its name), which says
        what the code's said."""
        cls, e = getattr(builtins, name, None), None
        if isinstance(cls, type) and issubclass(cls, Exception) and not issubclass(cls, StopIteration):
            try:
                e = cls(text)
            except BaseException:  # noqa: BLE001 - a constructor that wants more arguments
                pass
        if e is None:
            exits = isinstance(cls, type) and issubclass(cls, BaseException) and not issubclass(cls, Exception)
            e = (CodeExit if exits else CodeError)(text)
        e.code_said = text
        return e

    def value(self, x):
        return decode(x, self.remote)

    def remote(self, ref, kind):
        r = self.remotes.get(ref)
        if r is None:
            r = self.remotes[ref] = Remote(self, ref, kind)
        return r

    def call(self, op, ref, *args):
        reply = self.rpc(op, ref, *args)
        if reply[0] == "stop":
            raise StopIteration
        return self.value(reply[1])

    def resolve(self, name):
        """A name of the code's (KeyError when it has none); a module the tests name is the checker's own."""
        reply = self.rpc("name", name)
        if reply[0] == "missing":
            raise KeyError(name)
        if reply[0] == "module":
            if reply[1] == name and name in sys.stdlib_module_names:
                return __import__(name)
            raise KeyError(name)
        return self.value(reply[1])

    def arg(self, v):
        """A test's argument for the code, as :func:`encode` writes it (handles by reference)."""
        return encode(v, lambda o: ["R", o._ref, o._kind] if type(o) is Remote and o._checker is self else _refuse(o),
                      NAMED)


def _refuse(o):
    raise TypeError("a %s cannot be passed to the code (only built-in data and the code's own objects)"
                    % type(o).__name__)


class Remote:
    """One of the code's objects that is not built-in data (a function, a class, an instance, an iterator): the
    tests may call it, iterate it, take its len, bool or str. It equals only itself."""

    __slots__ = ("_checker", "_ref", "_kind", "__weakref__")

    def __init__(self, checker, ref, kind):
        self._checker, self._ref, self._kind = checker, ref, kind

    def __call__(self, *args, **kwargs):
        c = self._checker
        return c.call("call", self._ref, c.arg(list(args)), c.arg(dict(kwargs)))

    def __iter__(self):
        return self._checker.call("iter", self._ref)

    def __next__(self):
        return self._checker.call("next", self._ref)

    def __len__(self):
        return self._checker.call("len", self._ref)

    def __bool__(self):
        return self._checker.call("bool", self._ref)

    def __str__(self):
        return self._checker.call("str", self._ref)

    def __repr__(self):
        return "<%s of the code's>" % self._kind

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    __hash__ = object.__hash__


class Names(dict):
    """A test's builtins: the checker's own, then the code's names, resolved in the worker on first use."""

    __slots__ = ("checker",)

    def __missing__(self, name):
        self[name] = value = self.checker.resolve(name)
        return value


def undumpable():
    """PR_SET_DUMPABLE 0: the worker (same user, no capabilities) can neither ptrace the checker nor read its
    memory. Best effort: where it fails, /proc is still absent and ctypes refused to the worker."""
    try:
        import _ctypes

        class Int(_ctypes._SimpleCData):
            _type_ = "i"

        class Function(_ctypes.CFuncPtr):
            _flags_, _restype_ = _ctypes.FUNCFLAG_CDECL, Int

        class Libc:
            _handle = _ctypes.dlopen(None, 2)

        Function(("prctl", Libc))(4, 0, 0, 0, 0)
    except BaseException:  # noqa: BLE001
        pass


def watch(wall):
    """End the checker (and so the sandbox) when the grader closes stdin or dies, or at the wall time."""
    try:
        select.select([0], [], [], wall)
    finally:
        os._exit(1)


def main():
    first = recv(0)  # the code, the limits: all the worker may know
    limits = first["rlimits"]
    for name, v in limits.items():  # CPU: SIGXCPU at the limit, SIGKILL a second later (if it is caught)
        resource.setrlimit(getattr(resource, name), (v, v + (name == "RLIMIT_CPU")))
    os.chdir(first["cwd"])
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(req_w)
            os.close(resp_r)
            worker(req_r, resp_w, first["code"], first["setup"])
        finally:
            os._exit(1)  # never on into the checker's part
    os.close(req_r)
    os.close(resp_w)
    undumpable()
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # as PID 1 it gets no other signal from inside the sandbox
    job = recv(0)  # the tests, the report pipe, the nonce: only now, and only here
    _thread.start_new_thread(watch, (job["wall"],))
    nonce, fd = job["nonce"], job["fd"]

    def emit(line):
        os.write(fd, (nonce + " " + line[:400].replace("\n", " ") + "\n").encode("utf-8", "replace"))

    c = Checker(req_w, resp_r, pid, emit, limits)
    try:
        c.rpc("exec")
    except CodeGone:
        os._exit(0)
    except BaseException as e:  # noqa: BLE001
        emit("code " + said(e))
        os._exit(0)
    run_tests(c, job, emit)
    os._exit(0)


def run_tests(c, job, emit):
    """Each test in fresh builtins of the checker's own, with the prompt's helpers and the names under test; its
    outcome on the report pipe, then ``done``."""
    pristine, kept = dict(builtins.__dict__), None
    prefix = compiled(job["prefix"], "prompt.py")
    tests = [compiled(t, "test_%d.py" % i) for i, t in enumerate(job["tests"])]
    for i, test in enumerate(tests):
        c.where = "during test %d" % i
        try:
            if isinstance(test, BaseException):
                raise test
            if job["setup"]:
                c.rpc("setup")
            names = Names(pristine)
            names.checker = c
            g = {"__name__": "__main__", "__builtins__": names}
            if not isinstance(prefix, BaseException):
                try:
                    exec(prefix, g)  # the prompt's helpers, as the item wrote them (never the code's)
                except Exception:  # noqa: BLE001
                    pass
            if kept is None or job["setup"]:  # the names under test: the code's, even where they shadow a builtin
                kept = {}
                for name in job["keep"]:
                    try:
                        kept[name] = c.resolve(name)
                    except KeyError:
                        kept[name] = None
            for name, value in kept.items():
                g.pop(name, None)
                if value is not None:
                    g[name] = value
            exec(test, g)
            if c.gone:
                raise CodeGone(c.gone)  # a test that swallowed the worker's end does not pass
        except BaseException as e:  # noqa: BLE001
            emit("fail %d %s" % (i, said(e)))
        else:
            emit("ok %d" % i)
    emit("done %d" % len(tests))


def said(e):
    """Why a test failed: what the code's exception said, or the test's own."""
    text = getattr(e, "code_said", None)
    return text if type(text) is str else why(e)


def compiled(text, name):
    try:
        return compile(text, name, "exec")
    except BaseException as e:  # noqa: BLE001
        return e


main()
