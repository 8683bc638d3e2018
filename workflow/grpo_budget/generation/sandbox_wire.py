"""The sandbox's wire (part of the harness text, see :mod:`grpo_budget.generation.sandbox_harness`; stdlib only,
never imported by the package): length-prefixed compact JSON messages between the grader, the checker and the worker,
and the codec
that carries values across. Built-in data crosses by value and is rebuilt as exactly the built-in types; anything
else crosses as a handle."""

import builtins
import os
import sys

import _json

CAP = 32 << 20  # the largest message either side takes
TAGS = {"L": list, "T": tuple, "S": set, "F": frozenset}  # sequences: tag, then the items; "D": dict's keys, values
COLLECTIONS = {"Q": "deque", "N": "Counter", "O": "OrderedDict", "DD": "defaultdict"}  # imported only when used
# A built-in type or function crosses by its name (MBPP's tests pass int, str, float). The checker takes only types
# (never eval, exec, open, getattr... chosen by the code), the worker both.
NAMED = (type, type(len))


class JSON:
    """What _json's C scanner reads (the json package, with re and enum, would double the harness's start-up)."""

    strict, object_hook, object_pairs_hook, parse_float, parse_int = True, None, None, float, int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__


def _unencodable(o):
    raise TypeError("a %s in a message" % type(o).__name__)


_scan = _json.make_scanner(JSON())
_dump = _json.make_encoder(None, _unencodable, _json.encode_basestring_ascii, None, ":", ",", False, False, True)


def read_exactly(fd, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def recv(fd):
    """One message (ValueError for one that is not compact JSON)."""
    n = int.from_bytes(read_exactly(fd, 4), "big")
    if n > CAP:
        raise ValueError("a message of %d bytes" % n)
    text = read_exactly(fd, n).decode("ascii")
    try:
        message, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("a message that is not JSON") from None
    if end != len(text):
        raise ValueError("a message that is not JSON")
    return message


def send(fd, message):
    data = "".join(_dump(message, 0)).encode("ascii")
    if len(data) > CAP:
        raise ValueError("a value of more than %d MiB" % (CAP >> 20))
    data = len(data).to_bytes(4, "big") + data
    while data:
        data = data[os.write(fd, data):]


def encode(v, handle, named=(type,)):
    """``v`` as JSON: built-in data by value (arrays are tagged), a built-in of a ``named`` kind by its name,
    anything else as ``handle(v)``. Only base-type slots read a subclass, so no code of the completion runs."""
    t = type(v)
    if v is None or t is bool or t is str:
        return v
    if issubclass(t, int):
        v = int.__int__(v)
        return v if -(1 << 63) < v < 1 << 63 else ["I", format(v, "x")]
    if issubclass(t, float):
        return float.__float__(v)
    if issubclass(t, str):
        return str.__str__(v)
    if issubclass(t, complex):
        return ["C", complex.__complex__(v).real, complex.__complex__(v).imag]
    if t is dict:
        return ["D"] + [encode(x, handle, named) for kv in dict.items(v) for x in kv]
    for tag, kind in TAGS.items():
        if t is kind:
            return [tag] + [encode(x, handle, named) for x in kind.__iter__(v)]
    col = sys.modules.get("collections")  # none of its types exists before it is imported
    for tag, name in COLLECTIONS.items():
        if col is not None and t is getattr(col, name, None):
            items = t.__iter__(v) if tag == "Q" else (x for kv in dict.items(v) for x in kv)
            return [tag] + [encode(x, handle, named) for x in items]
    for base in (dict, list, tuple, set, frozenset):
        if issubclass(t, base):  # a subclass crosses as its base type's value
            return encode(base(base.__iter__(v)) if base is not dict else dict(dict.items(v)), handle, named)
    if t in named and builtins.__dict__.get(v.__name__) is v:
        return ["Y", v.__name__]
    if issubclass(t, (bytes, bytearray)):
        return ["B" if issubclass(t, bytes) else "A", bytes.hex(v) if issubclass(t, bytes) else bytearray.hex(v)]
    return handle(v)


def decode(x, remote, named=(type,)):
    """What :func:`encode` wrote, rebuilt as exactly the built-in types (handles through ``remote``, built-ins by
    name where of a ``named`` kind); anything else is a ValueError."""
    t = type(x)
    if x is None or t is bool or t is int or t is float or t is str:
        return x
    if t is not list or not x or type(x[0]) is not str:
        raise ValueError("a malformed value")
    tag, items = x[0], x[1:]
    if tag in TAGS or tag in COLLECTIONS or tag == "D":
        items = [decode(i, remote, named) for i in items]
        if tag in TAGS:
            return TAGS[tag](items)
        import collections  # the checker's own: only when the code returned one of its types
        if tag == "Q":
            return collections.deque(items)
        if len(items) % 2:
            raise ValueError("a malformed mapping")
        d = dict(zip(items[::2], items[1::2]))
        return (d if tag == "D" else collections.defaultdict(None, d) if tag == "DD"
                else getattr(collections, COLLECTIONS[tag])(d))
    if tag == "I" and len(items) == 1 and type(items[0]) is str:
        return int(items[0], 16)
    if tag == "C" and len(items) == 2 and all(type(i) in (int, float) for i in items):
        return complex(items[0], items[1])
    if tag in ("B", "A") and len(items) == 1 and type(items[0]) is str:
        return (bytes if tag == "B" else bytearray).fromhex(items[0])
    if tag == "Y" and len(items) == 1 and type(items[0]) is str and type(builtins.__dict__.get(items[0])) in named:
        return builtins.__dict__[items[0]]
    if tag == "R" and len(items) == 2 and type(items[0]) is int and type(items[1]) is str:
        return remote(items[0], items[1])
    raise ValueError("a malformed value")


def why(e):
    try:
        return type(e).__name__ + ": " + str(repr(e))[:200]
    except BaseException:  # noqa: BLE001 - a repr that raises
        return type(e).__name__
