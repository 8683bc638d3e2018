"""The sandbox's wire (part of the harness text, see :mod:`grpo_budget.generation.sandbox_harness`; stdlib only,
never imported by the package): length-prefixed JSON messages between the checker and the worker, and the codec
that carries values across. Built-in data crosses by value and is rebuilt as exactly the built-in types; anything
else crosses as a handle."""

import builtins
import json
import os
from collections import Counter, OrderedDict, defaultdict, deque

CAP = 32 << 20  # the largest message either side takes
TAGS = {"L": list, "T": tuple, "S": set, "F": frozenset, "Q": deque}  # sequences: tag, then the items
MAPS = {"D": dict, "N": Counter, "O": OrderedDict, "DD": defaultdict}  # mappings: tag, then key, value, ...
NAMED = (type, type(len))  # a built-in type or function crosses by its name (MBPP passes int, str, float)


def read_exactly(fd, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def recv(fd):
    n = int.from_bytes(read_exactly(fd, 4), "big")
    if n > CAP:
        raise ValueError("a message of %d bytes" % n)
    return json.loads(read_exactly(fd, n))


def send(fd, message):
    data = json.dumps(message, separators=(",", ":")).encode()
    if len(data) > CAP:
        raise ValueError("a value of more than %d MiB" % (CAP >> 20))
    data = len(data).to_bytes(4, "big") + data
    while data:
        data = data[os.write(fd, data):]


def encode(v, handle):
    """``v`` as JSON: built-in data by value (arrays are tagged), anything else as ``handle(v)``. Only base-type
    slots read a subclass, so no code of the completion runs."""
    t = type(v)
    if v is None or t is bool or t is str:
        return v
    if issubclass(t, bool):
        return bool(v)
    if issubclass(t, int):
        v = int.__int__(v)
        return v if -(1 << 63) < v < 1 << 63 else ["I", format(v, "x")]
    if issubclass(t, float):
        return float.__float__(v)
    if issubclass(t, str):
        return str.__str__(v)
    if issubclass(t, complex):
        return ["C", complex.__complex__(v).real, complex.__complex__(v).imag]
    for tag, kind in MAPS.items():
        if t is kind:
            return [tag] + [encode(x, handle) for kv in dict.items(v) for x in kv]
    for tag, kind in TAGS.items():
        if t is kind:
            return [tag] + [encode(x, handle) for x in kind.__iter__(v)]
    for base, tag in ((dict, "D"), (list, "L"), (tuple, "T"), (set, "S"), (frozenset, "F")):
        if issubclass(t, base):  # a subclass crosses as its base type's value
            return encode(base(base.__iter__(v)) if base is not dict else dict(dict.items(v)), handle)
    if t in NAMED and builtins.__dict__.get(v.__name__) is v:
        return ["Y", v.__name__]
    if issubclass(t, (bytes, bytearray)):
        return ["B" if issubclass(t, bytes) else "A", bytes.hex(v) if issubclass(t, bytes) else bytearray.hex(v)]
    return handle(v)


def decode(x, remote):
    """What :func:`encode` wrote, rebuilt as exactly the built-in types (handles through ``remote``); anything
    else is a ValueError."""
    t = type(x)
    if x is None or t is bool or t is int or t is float or t is str:
        return x
    if t is not list or not x or type(x[0]) is not str:
        raise ValueError("a malformed value")
    tag, items = x[0], x[1:]
    if tag in TAGS:
        return TAGS[tag](decode(i, remote) for i in items)
    if tag in MAPS:
        if len(items) % 2:
            raise ValueError("a malformed mapping")
        pairs = [decode(i, remote) for i in items]
        d, kind = dict(zip(pairs[::2], pairs[1::2])), MAPS[tag]
        return d if kind is dict else defaultdict(None, d) if kind is defaultdict else kind(d)
    if tag == "I" and len(items) == 1 and type(items[0]) is str:
        return int(items[0], 16)
    if tag == "C" and len(items) == 2 and all(type(i) in (int, float) for i in items):
        return complex(items[0], items[1])
    if tag in ("B", "A") and len(items) == 1 and type(items[0]) is str:
        return (bytes if tag == "B" else bytearray).fromhex(items[0])
    if tag == "Y" and len(items) == 1 and type(items[0]) is str and type(builtins.__dict__.get(items[0])) in NAMED:
        return builtins.__dict__[items[0]]
    if tag == "R" and len(items) == 2 and type(items[0]) is int and type(items[1]) is str:
        return remote(items[0], items[1])
    raise ValueError("a malformed value")


def why(e):
    try:
        return type(e).__name__ + ": " + str(repr(e))[:200]
    except BaseException:  # noqa: BLE001 - a repr that raises
        return type(e).__name__
