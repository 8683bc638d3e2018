"""The sandbox's worker (part of the harness text, see :mod:`grpo_budget.generation.sandbox_harness`; stdlib only,
never imported by the package): forked from the checker before the checker reads the tests, it runs the completion's
code and answers the checker's requests. Nothing it does reaches the checker but the values it answers with."""

import builtins
import os
import sys

import _imp

from sandbox_wire import NAMED, decode, encode, recv, send, why  # joined: the harness is one text (sandbox.py)

DENIED = {"os.fork", "os.forkpty", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "subprocess.Popen",
          "pty.spawn", "os.kill", "os.killpg", "sys.settrace", "sys.setprofile", "sys.addaudithook",
          "sys._current_frames", "sys._current_exceptions", "gc.get_objects", "gc.get_referrers",
          "gc.get_referents", "mmap.__new__", "sandbox.report"}
DENIED_MODULES = {"ctypes", "_ctypes", "_xxsubinterpreters"}  # and "_test*" (raw memory access)


def guard(resp):
    """The worker's audit hook. It reads only exact strs and never calls an object of the code's (a str subclass as
    an event name ends the run), so no frame of it is ever below the code's. It also owns the only references to
    ``_imp``'s module constructors, which importing goes through (:func:`worker` replaces them)."""
    write, exit_now, spec = os.write, os._exit, sys.modules["_frozen_importlib"].ModuleSpec
    create = {False: _imp.create_builtin, True: _imp.create_dynamic}

    def block(what):
        text = "".join(c if c.isalnum() or c in " ._-" else "?" for c in what[:120])
        data = ('["blocked","' + text + '"]').encode()
        try:
            write(resp, len(data).to_bytes(4, "big") + data)
        finally:
            exit_now(0)

    def fork_exec(*args, **kwargs):
        block("_posixsubprocess.fork_exec")

    def module(name, origin, dynamic, box):
        if type(name) is not str or type(box) is not list or type(dynamic) is not bool or not (
                origin is None or type(origin) is str):
            block("import of a module by a forged spec")
        if name.partition(".")[0] in DENIED_MODULES or name.startswith("_test"):
            block("import " + name)
        try:
            made = create[dynamic](spec(name, None, origin=origin))
        except BaseException:  # noqa: BLE001 - a fresh error: the caught one's traceback holds this frame
            box.append(ImportError("cannot load " + name))
            return
        if name == "_posixsubprocess":  # subprocess imports it; its fork_exec raises no audit event
            made.fork_exec = fork_exec
        box.append(made)

    def hook(event, args):
        try:
            if type(event) is not str:
                block("an audit event named by a str subclass")
            if event == "sandbox.module":  # :func:`worker`'s constructors: name, origin, dynamic, box
                module(*args)
            elif event == "import":
                name = args[0]
                if type(name) is not str or name.partition(".")[0] in DENIED_MODULES or name.startswith("_test"):
                    block("import " + (name if type(name) is str else "?"))
            elif event in DENIED or event.startswith(("socket.", "ctypes.", "_ctypes.")):
                block(event)
        except BaseException:  # noqa: BLE001 - nothing raised here may carry this frame out to the code
            block("a malformed audit event")

    return hook


def _constructors():
    """Stand-ins for ``_imp.create_builtin`` and ``create_dynamic`` that ask the audit hook (which holds the real
    ones) for the module, so a denied module cannot be built around ``import`` either."""
    audit = sys.audit

    def made(box):
        if isinstance(box[0], ImportError):
            raise box[0]
        return box[0]

    def create_builtin(spec):
        box = []
        audit("sandbox.module", str(spec.name), None, False, box)
        return made(box)

    def create_dynamic(spec, file=None):
        box = []
        audit("sandbox.module", str(spec.name), str(spec.origin), True, box)
        return made(box)

    return create_builtin, create_dynamic


def worker(req, resp, code, setup):
    """Forked from the checker (which then reads the tests): let go of everything of the checker's, guard, run the
    code, then answer requests until the checker is done."""
    try:
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    except OSError:
        os.close(0)  # never the checker's stdin: the tests come on it
    low, high = sorted((req, resp))  # every other descriptor goes, the report pipe's (any number) among them
    os.closerange(3, low)
    os.closerange(low + 1, high)
    os.closerange(high + 1, 1 << 20)
    sys.addaudithook(guard(resp))
    _imp.create_builtin, _imp.create_dynamic = _constructors()
    objects, ids, missing = [], {}, object()

    def handle(v):
        r = ids.get(id(v))
        if r is None or objects[r] is not v:
            r = ids[id(v)] = len(objects)
            objects.append(v)
        return ["R", r, type(v).__name__ if type(type(v).__name__) is str else "?"]

    def value(x):
        return decode(x, lambda ref, kind: objects[ref], NAMED)

    ns = {"__name__": "__main__", "__builtins__": dict(builtins.__dict__)}
    current = ns
    while True:
        try:
            request = recv(req)
        except BaseException:  # noqa: BLE001 - the checker is done (or the code broke the pipe)
            os._exit(0)
        op, args, out = request[0], request[1:], None
        try:
            if op == "exec":
                exec(compile(code, "solution.py", "exec"), ns)
                out = ["ok"]
            elif op == "setup":
                current = dict(ns)
                exec(compile(setup, "setup.py", "exec"), current)
                out = ["ok"]
            elif op == "name":
                v = current.get(args[0], missing)
                out = (["missing"] if v is missing else ["module", v.__name__] if type(v) is type(sys)
                       else ["val", encode(v, handle)])
            elif op == "next":
                try:
                    out = ["val", encode(next(objects[args[0]]), handle)]
                except StopIteration:
                    out = ["stop"]
            else:
                f = {"call": lambda o, a, k: o(*value(a), **value(k)), "iter": lambda o: iter(o), "len": len,
                     "bool": bool, "str": str}[op]
                out = ["val", encode(f(objects[args[0]], *args[1:]), handle)]
            send(resp, out)
        except BaseException as e:  # noqa: BLE001 - SystemExit too: it answers as an error
            try:
                send(resp, ["err", type(e).__name__, str(why(e))[:400]])
            except BaseException:  # noqa: BLE001
                send(resp, ["err", "ValueError", "the value could not be sent"])
