"""Random values of the subset a memory snapshot's pickle uses, pickled by Python's own
pickle, with the canonical form tests/pickle_reader.rs compares vramscope's reader with.
Standard library only.

Usage: pickle_values.py OUTDIR SEED COUNT
Writes OUTDIR/<seed>-<protocol>.pickle and .canon for protocols 2 to 5 (bytes only from 3
on: protocol 2 writes bytes through a global, which the reader refuses).

The values: None, bools, ints of every width (BININT1, BININT2, BININT, LONG1 up to 8
bytes and beyond, LONG4 past 255 bytes, negative ones), floats (infinities, -0.0),
strings (empty, ASCII, every plane but the surrogates, control characters), bytes, lists,
tuples and dicts nested and empty, containers referred to twice (the same object put in
two places: the memo shares it), and now and then a string or list large enough that the
pickle's frames pass 64 KiB.

The canonical form (read::canonical in src/memory_snapshot/read.rs writes the same):
N T F, decimal ints, f + the float's 16 hex digits, s/b + the hex of the UTF-8 or bytes,
[a,b] (a,b) {k:v,k:v} in order, each container `#n` when first seen (numbered in order)
and `@n` when seen again. The empty tuple is not memoized by the pickler (it is one
object in CPython): every one is a new container there.
"""

import pickle
import random
import struct
import sys


def random_int(rng):
    kind = rng.randrange(9)
    if kind == 0:
        return rng.randrange(256)
    if kind == 1:
        return rng.randrange(256, 65536)
    if kind == 2:
        return rng.randrange(-(2**31), 2**31)
    if kind == 3:
        return rng.randrange(2**31, 2**63)
    if kind == 4:
        return -rng.randrange(2**31, 2**63)
    if kind == 5:
        return rng.choice([2**63 - 1, -(2**63), 2**63, 2**64 - 1, 2**64, -(2**64), -1, 0])
    if kind == 6:
        return rng.randrange(2**64, 2**300) * rng.choice([1, -1])
    if kind == 7:
        # LONG4: more than 255 bytes.
        return rng.randrange(2**2100, 2**2200) * rng.choice([1, -1])
    return rng.randrange(-300, 300)


def random_char(rng):
    plane = rng.randrange(6)
    if plane == 0:
        return chr(rng.randrange(0x20, 0x7F))
    if plane == 1:
        return chr(rng.randrange(0, 0x20))
    if plane == 2:
        return chr(rng.randrange(0x80, 0xD800))
    if plane == 3:
        return chr(rng.randrange(0xE000, 0x10000))
    if plane == 4:
        return chr(rng.randrange(0x10000, 0x110000))
    return rng.choice(["\u202e", "\x1b", "é", "漢", "\U0001F600"])


def random_str(rng):
    if rng.random() < 0.01:
        return "".join(random_char(rng) for _ in range(70_000))
    return "".join(random_char(rng) for _ in range(rng.randrange(0, 12)))


def random_float(rng):
    return rng.choice([0.0, -0.0, float("inf"), float("-inf"), 1e308, 5e-324,
                       rng.uniform(-1e6, 1e6), rng.random()])


class Gen:
    def __init__(self, rng, with_bytes):
        self.rng = rng
        self.with_bytes = with_bytes
        self.shared = []  # (container, depth) built before: refer to them again

    def scalar(self):
        rng = self.rng
        kind = rng.randrange(7 if self.with_bytes else 6)
        if kind == 0:
            return rng.choice([None, True, False])
        if kind in (1, 2):
            return random_int(rng)
        if kind == 3:
            return random_float(rng)
        if kind in (4, 5):
            return random_str(rng)
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 10)))

    def key(self, depth):
        rng = self.rng
        kind = rng.randrange(10)
        if kind < 6:
            return random_str(rng)
        if kind < 8:
            return random_int(rng)
        if kind == 8:
            return rng.choice([None, True, 1.5])
        return tuple(self.scalar() for _ in range(rng.randrange(0, 3)))

    def value(self, depth):
        rng = self.rng
        if self.shared and rng.random() < 0.15:
            v, d = rng.choice(self.shared)
            if d + depth < 40:
                return v, d
        if depth >= 6 or rng.random() < 0.45:
            return self.scalar(), 0
        if rng.random() < 0.01:
            # A batch past 1,000 items, and a frame past 64 KiB.
            return [random_int(rng) for _ in range(5000)], 1
        kind = rng.randrange(3)
        n = rng.randrange(0, 6)
        deepest = 0
        if kind == 0:
            items = []
            for _ in range(n):
                v, d = self.value(depth + 1)
                items.append(v)
                deepest = max(deepest, d)
            out = items
        elif kind == 1:
            items = []
            for _ in range(n):
                v, d = self.value(depth + 1)
                items.append(v)
                deepest = max(deepest, d)
            out = tuple(items)
        else:
            out = {}
            for _ in range(n):
                v, d = self.value(depth + 1)
                out[self.key(depth)] = v
                deepest = max(deepest, d)
        self.shared.append((out, deepest + 1))
        return out, deepest + 1


def canonical(value):
    seen = {}
    out = []

    def go(v):
        if v is None:
            out.append("N")
        elif v is True:
            out.append("T")
        elif v is False:
            out.append("F")
        elif isinstance(v, int):
            out.append(str(v))
        elif isinstance(v, float):
            out.append("f" + struct.pack(">d", v).hex())
        elif isinstance(v, str):
            out.append("s" + v.encode("utf-8").hex())
        elif isinstance(v, bytes):
            out.append("b" + v.hex())
        else:
            shared = not (isinstance(v, tuple) and len(v) == 0)
            if shared and id(v) in seen:
                out.append("@%d" % seen[id(v)])
                return
            n = len(seen)
            # An empty tuple takes a number each time, as the reader's new node does.
            seen[id(v) if shared else ("empty tuple", n)] = n
            out.append("#%d" % n)
            if isinstance(v, list):
                out.append("[")
                for i, item in enumerate(v):
                    if i:
                        out.append(",")
                    go(item)
                out.append("]")
            elif isinstance(v, tuple):
                out.append("(")
                for i, item in enumerate(v):
                    if i:
                        out.append(",")
                    go(item)
                out.append(")")
            else:
                out.append("{")
                for i, (k, item) in enumerate(v.items()):
                    if i:
                        out.append(",")
                    go(k)
                    out.append(":")
                    go(item)
                out.append("}")

    go(value)
    return "".join(out)


def main():
    out, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for protocol in (2, 3, 4, 5):
        rng = random.Random(seed * 10 + protocol)
        gen = Gen(rng, with_bytes=protocol >= 3)
        values = [gen.value(0)[0] for _ in range(count)]
        with open(f"{out}/{seed}-{protocol}.pickle", "wb") as f:
            pickle.dump(values, f, protocol=protocol)
        with open(f"{out}/{seed}-{protocol}.canon", "w") as f:
            f.write(canonical(values))


if __name__ == "__main__":
    main()
