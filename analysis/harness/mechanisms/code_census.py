"""What a library's machine code is made of, counted from its disassembly (objdump), so that a mechanism the
paper names is measured in the library that ran: how many instructions it has, how many `rep stos` string
stores (gcc lowers a bounded memset to them) and how many calls to memset it makes (clang calls memset where
gcc stores inline). A run records the census of every library it identifies, beside the library's sha256, and
keeps the instructions around each `rep stos` and each memset call as text (`excerpt`): the poison path as the
compiler wrote it, which the counts alone do not show."""
import functools
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

OBJDUMP = ["objdump", "-d", "-C", "--no-show-raw-insn"]
_INSTRUCTION = re.compile(r"^\s+[0-9a-f]+:\t")
_SYMBOL = re.compile(r"^[0-9a-f]+ <(.+)>:$")
PATTERNS = {
    "rep_stos": re.compile(r"\trep stos"),
    "memset_calls": re.compile(r"\t(?:call|jmp)\s+[0-9a-f]+ <(?:__)?memset(?:@plt|_chk@plt)?>"),
    "memcpy_calls": re.compile(r"\t(?:call|jmp)\s+[0-9a-f]+ <(?:__)?memcpy(?:@plt|_chk@plt)?>"),
}
# an excerpt: this many instructions before each rep stos or memset call (where the count and the fill value are
# set up) and after it, inside its symbol, reaching further back (up to FILL_LOOKBACK) to the instruction that sets
# a constant fill; overlapping windows merged; at most MAX_WINDOWS kept per library
BEFORE, AFTER = 12, 3
FILL_LOOKBACK = 40
MAX_WINDOWS = 8
# the register that holds the byte stored: rep stos stores al/ax/eax/rax, memset takes it in esi
_FILL_REGISTERS = {"rep_stos": ("al", "ax", "eax", "rax"), "memset_calls": ("sil", "si", "esi", "rsi")}
_IMMEDIATE = re.compile(r"\tmov[a-z]*\s+\$0x([0-9a-f]+),%([a-z0-9]+)\s*$")
_WRITES = re.compile(r",%([a-z0-9]+)\s*$")


def count(disassembly: str) -> dict:
    """{"instructions": n, "rep_stos": n, "memset_calls": n, "memcpy_calls": n} of objdump -d text."""
    out = {"instructions": 0, **{k: 0 for k in PATTERNS}}
    for line in disassembly.splitlines():
        if not _INSTRUCTION.match(line):
            continue
        out["instructions"] += 1
        for key, pattern in PATTERNS.items():
            if pattern.search(line):
                out[key] += 1
    return out


def _fill_byte(lines: list[str], registers) -> tuple[int | None, int | None]:
    """(the byte a store sequence fills with, the index in `lines` of the instruction that sets it), when the last
    write to its register in `lines` (those before it) is an immediate whose bytes are all one non-zero value
    (0xe5, 0xe5e5e5e5e5e5e5e5); (None, None) otherwise (zeroing, a value computed, nothing written there)."""
    for k in range(len(lines) - 1, -1, -1):
        written = _WRITES.search(lines[k])
        if not written or written.group(1) not in registers:
            continue
        imm = _IMMEDIATE.search(lines[k])
        if not imm:
            return None, None
        value = bytes.fromhex(imm.group(1).zfill(len(imm.group(1)) + len(imm.group(1)) % 2))
        return (value[0], k) if value and value[0] and len(set(value)) == 1 else (None, None)
    return None, None


def windows(disassembly: str) -> list[dict]:
    """Every window around a rep stos or memset call, overlapping ones (in one symbol) merged, in address order:
    {"symbol", "lines", "targets": indexes of the rep stos / call lines in `lines`, "fill": byte or None}."""
    symbols, current = [], None
    for line in disassembly.splitlines():
        m = _SYMBOL.match(line)
        if m:
            current = (m.group(1), [])
            symbols.append(current)
        elif current is not None and _INSTRUCTION.match(line):
            current[1].append(line.rstrip())
    out = []
    for symbol, lines in symbols:
        spans = []
        for i, line in enumerate(lines):
            kind = next((k for k in ("rep_stos", "memset_calls") if PATTERNS[k].search(line)), None)
            if kind is None:
                continue
            back = max(0, i - FILL_LOOKBACK)
            fill, at = _fill_byte(lines[back:i], _FILL_REGISTERS[kind])
            start, end = min(max(0, i - BEFORE), back + at if at is not None else i), min(len(lines), i + AFTER + 1)
            if spans and start <= spans[-1]["end"]:
                spans[-1]["end"] = end
                spans[-1]["targets"].append(i)
                spans[-1]["fill"] = spans[-1]["fill"] if spans[-1]["fill"] is not None else fill
            else:
                spans.append({"start": start, "end": end, "targets": [i], "fill": fill})
        for s in spans:
            out.append({"symbol": symbol, "lines": lines[s["start"]:s["end"]],
                        "targets": [t - s["start"] for t in s["targets"]], "fill": s["fill"]})
    return out


def excerpt(disassembly: str, name: str, max_windows: int = MAX_WINDOWS, tool: str = "", sha256: str = "") -> str:
    """The poison path of a library as text: a heading (the library's file name, never its folder; the counts; how
    many windows were kept and cut), then each kept window under its symbol, the rep stos and memset call lines
    marked `=>`. Windows that fill a constant non-zero byte (a poisoning) are kept first, then the others, by
    address; the kept ones are printed in address order."""
    found = windows(disassembly)
    ranked = sorted(range(len(found)), key=lambda k: (found[k]["fill"] is None, k))
    kept = sorted(ranked[:max_windows])
    counts = count(disassembly)
    fills = sum(w["fill"] is not None for w in found)
    out = [f"# {name}" + (f" (sha256 {sha256})" if sha256 else "") + ": the instructions around each rep stos and "
           f"each call to memset ({' '.join(OBJDUMP)}" + (f"; {tool}" if tool else "") + ")",
           f"# instructions {counts['instructions']}, rep stos {counts['rep_stos']}, memset calls "
           f"{counts['memset_calls']}, memcpy calls {counts['memcpy_calls']}",
           f"# windows of {BEFORE} instructions before (or back to the one setting a constant fill) and {AFTER} after, "
           f"overlapping ones merged: {len(found)} "
           f"windows, {fills} filling a constant non-zero byte; {len(kept)} kept (constant fills first, then by "
           f"address), {len(found) - len(kept)} cut"]
    for k in kept:
        w = found[k]
        fill = f", fills 0x{w['fill']:02x}" if w["fill"] is not None else ""
        out += ["", f"<{w['symbol']}>{fill}:"]
        out += [("=> " if i in w["targets"] else "   ") + line.lstrip(" ") for i, line in enumerate(w["lines"])]
    return "\n".join(out) + "\n"


def _objdump_version() -> str:
    try:
        proc = subprocess.run(["objdump", "--version"], capture_output=True, text=True)
    except FileNotFoundError:
        return ""
    return (proc.stdout.splitlines() or [""])[0].strip()


def _stored(sha256: str, name: str, tool: str) -> Path:
    """Where the census of one library's bytes is kept between processes: in the cache, under the library's
    sha256, its file name (the excerpt names it), objdump's version and this module's own source, so that a
    change of any of them examines the library afresh."""
    from analysis.paths import cache_dir

    key = hashlib.sha256("\0".join([sha256, name, tool, Path(__file__).read_text()]).encode()).hexdigest()[:32]
    return cache_dir() / "code_census" / f"{key}.json"


@functools.lru_cache(maxsize=64)
def _examined(path: str, size: int, mtime_ns: int) -> tuple[dict, str]:
    """One objdump pass over the library, or its result kept from an earlier process (a campaign with glibc
    disassembles libc.so.6 again otherwise, seconds each time)."""
    from analysis.paths import file_sha256

    sha256, tool, name = file_sha256(path), _objdump_version(), Path(path).name
    stored = _stored(sha256, name, tool)
    try:
        kept = json.loads(stored.read_text())
        return kept["census"], kept["excerpt"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        proc = subprocess.run([*OBJDUMP, path], capture_output=True, text=True)
    except FileNotFoundError:
        return {}, ""
    if proc.returncode != 0:
        return {}, ""
    result = count(proc.stdout), excerpt(proc.stdout, name, tool=tool, sha256=sha256)
    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        partial = stored.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps({"census": result[0], "excerpt": result[1]}))
        os.replace(partial, stored)
    except OSError:
        pass  # a cache that cannot be written only costs the next process the same objdump pass
    return result


def examine(library) -> tuple[dict, str]:
    """(the census, the excerpt) of a library, from one objdump pass; ({}, "") when it is no file objdump can read.
    Kept per file (its size and modification time): a run asks for the census and then for the excerpt."""
    path = Path(library)
    if not path.is_file():
        return {}, ""
    st = path.stat()
    return _examined(str(path), st.st_size, st.st_mtime_ns)


def census(library) -> dict:
    """The counts of a library's code ({} when it is no file objdump can read)."""
    return examine(library)[0]
