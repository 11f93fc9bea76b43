"""What a brought program's ELF file says about how it was linked: its program interpreter (the dynamic loader it
names: glibc's ld-linux, musl's ld-musl, none for a static program) and the functions of its symbol table (where
a fault's pc is in a static program, whose code shares one file with its C library). 64-bit little-endian ELF
only (what the harness runs); only the standard library is used.
"""
import struct
from functools import lru_cache
from pathlib import Path

PT_INTERP = 3
SHT_SYMTAB = 2
STT_FUNC = 2


def _header(data: bytes) -> tuple:
    if data[:4] != b"\x7fELF" or len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    return struct.unpack_from("<QQIHHHHHH", data, 32)  # phoff, shoff, flags, ehsize, phentsize, phnum, shentsize, shnum, shstrndx


def interpreter(path) -> str:
    """The program interpreter a dynamically linked program names (/lib64/ld-linux-x86-64.so.2, ...), '' for a
    static one."""
    data = Path(path).read_bytes()
    phoff, _, _, _, phentsize, phnum, _, _, _ = _header(data)
    for i in range(phnum):
        ptype, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if ptype == PT_INTERP:
            return data[offset:offset + filesz].rstrip(b"\0").decode(errors="replace")
    return ""


def libc_of_interpreter(interp: str) -> str:
    """The C library a dynamic loader belongs to: glibc (ld-linux*), musl (ld-musl*), or the loader's name."""
    name = interp.rsplit("/", 1)[-1]
    if name.startswith("ld-musl"):
        return "musl"
    if name.startswith("ld-linux") or name.startswith("ld64.so") or name.startswith("ld.so"):
        return "glibc"
    return name


@lru_cache(maxsize=256)
def _functions(path: str, size: int, mtime_ns: int) -> tuple:
    data = Path(path).read_bytes()
    _, shoff, _, _, _, _, shentsize, shnum, _ = _header(data)
    out = []
    for i in range(shnum):
        _, stype, _, _, offset, size_, link, _, _, entsize = struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
        if stype != SHT_SYMTAB or not entsize:
            continue
        _, _, _, _, str_off, str_size, _, _, _, _ = struct.unpack_from("<IIQQQQIIQQ", data, shoff + link * shentsize)
        strings = data[str_off:str_off + str_size]
        for at in range(offset, offset + size_, entsize):
            name_at, info, _, shndx, value, length = struct.unpack_from("<IBBHQQ", data, at)
            if info & 0xF != STT_FUNC or not value or not shndx:
                continue
            name = strings[name_at:strings.index(b"\0", name_at)].decode(errors="replace")
            out.append((value, value + max(length, 1), name))
    return tuple(sorted(set(out)))


def functions(path) -> tuple:
    """(start, end, name) of every function in the program's symbol table, by address; () when it was stripped."""
    st = Path(path).stat()
    return _functions(str(path), st.st_size, st.st_mtime_ns)


def function_at(funcs, pc: int) -> str:
    """The name of the function of `funcs` ((start, end, name), as functions gives them) holding pc, or ''."""
    for start, end, name in funcs:
        if start <= pc < end:
            return name
    return ""
