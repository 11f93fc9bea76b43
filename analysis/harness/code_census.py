"""What a library's machine code is made of, counted from its disassembly (objdump), so that a mechanism the
paper names is measured in the library that ran: how many instructions it has, how many `rep stos` string
stores (gcc lowers a bounded memset to them) and how many calls to memset it makes (clang calls memset where
gcc stores inline). A run records the census of every library it identifies, beside the library's sha256."""
import re
import subprocess
from pathlib import Path

_INSTRUCTION = re.compile(r"^\s+[0-9a-f]+:\t")
PATTERNS = {
    "rep_stos": re.compile(r"\trep stos"),
    "memset_calls": re.compile(r"\t(?:call|jmp)\s+[0-9a-f]+ <(?:__)?memset(?:@plt|_chk@plt)?>"),
    "memcpy_calls": re.compile(r"\t(?:call|jmp)\s+[0-9a-f]+ <(?:__)?memcpy(?:@plt|_chk@plt)?>"),
}


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


def census(library) -> dict:
    """The counts of a library's code ({} when it is no file objdump can read)."""
    path = Path(library)
    if not path.is_file():
        return {}
    try:
        proc = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True)
    except FileNotFoundError:
        return {}
    return count(proc.stdout) if proc.returncode == 0 else {}
