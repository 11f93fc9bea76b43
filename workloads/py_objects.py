"""python: an object-heavy CPython run for heapcost (run with PYTHONMALLOC=malloc, so every
object allocation reaches the allocator under test): dicts of records, lists, string building
and splitting, many small objects, and a garbage-collector-heavy phase of reference cycles.
usage: python3 py_objects.py SCALE   (prints checksum=<hex> last; depends only on SCALE)"""
import gc
import sys
import zlib


class Record:
    __slots__ = ("key", "name", "tags", "score")

    def __init__(self, key, name, tags, score):
        self.key, self.name, self.tags, self.score = key, name, tags, score


class Cell:
    """A graph node with a back reference: builds cycles only the collector can free."""

    def __init__(self, value):
        self.value = value
        self.links = []
        self.owner = None


def lcg(state):
    return (state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF


def records_phase(n, h):
    state, table = 11, {}
    for i in range(n):
        state = lcg(state)
        name = "user-%d-%x" % (i, state >> 40)
        tags = [("t%d" % ((state >> s) & 31)) for s in range(0, 40, 8)]
        table[name] = Record(i, name, tags, (state >> 20) % 1000)
    by_tag = {}
    for rec in table.values():
        for t in rec.tags:
            by_tag.setdefault(t, []).append(rec.score)
    for t in sorted(by_tag):
        h = zlib.crc32(("%s:%d:%d" % (t, len(by_tag[t]), sum(by_tag[t]))).encode(), h)
    for name in list(table)[::3]:
        del table[name]
    return zlib.crc32(str(len(table)).encode(), h)


def strings_phase(n, h):
    lines = []
    for i in range(n):
        words = ["w%d" % ((i * 7 + k * 13) % 101) for k in range(i % 12 + 1)]
        lines.append(" ".join(words))
    text = "\n".join(lines)
    counts = {}
    for line in text.split("\n"):
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
    for w in sorted(counts):
        h = zlib.crc32(("%s=%d" % (w, counts[w])).encode(), h)
    return zlib.crc32(text.upper().encode()[-64:], h)


def cycles_phase(n, h):
    gc.collect()
    state = 7
    for batch in range(max(1, n // 1000)):
        cells = [Cell(i) for i in range(1000)]
        for c in cells:
            state = lcg(state)
            other = cells[(state >> 33) % 1000]
            c.links.append(other)
            other.owner = c
            c.links.append({"v": c.value, "pair": (c.value, other.value)})
        h = zlib.crc32(str(sum(c.links[0].value for c in cells)).encode(), h)
        del cells, c, other
        if batch % 10 == 9:
            gc.collect()
    gc.collect()
    return h


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: py_objects.py SCALE")
    scale = float(sys.argv[1])
    if not scale > 0:
        sys.exit("py_objects.py: scale must be > 0")
    n = max(1, int(36000 * scale + 0.5))
    h = zlib.crc32(str(n).encode())
    h = records_phase(n, h)
    h = strings_phase(n, h)
    h = cycles_phase(2 * n, h)
    print("checksum=%08x" % h)


main()
