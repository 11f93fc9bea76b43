"""The census of a library's code: instructions, rep stos string stores and calls to memset, counted from
objdump's disassembly of a library compiled in the test so that each count is known."""
import subprocess

import pytest

from analysis.harness import code_census

DISASSEMBLY = """
0000000000006250 <memset@plt>:
    6250:\tjmp    *0x18eba(%rip)        # 1f110 <memset@GLIBC_2.2.5>

0000000000007100 <free>:
    7160:\trep stos %rax,%es:(%rdi)
    7170:\tcall   6250 <memset@plt>
    7175:\tjmp    6250 <memset@plt>
    7180:\tcall   6260 <memcpy@plt>
    7185:\tret
"""


def test_the_counts_of_a_disassembly():
    assert code_census.count(DISASSEMBLY) == {"instructions": 6, "rep_stos": 1, "memset_calls": 2, "memcpy_calls": 1}


def test_a_library_compiled_here_has_the_calls_its_source_makes(tmp_path):
    src = tmp_path / "poison.c"
    src.write_text("#include <string.h>\n"
                   "void wipe(char *p, unsigned long n) { memset(p, 0xe5, n); }\n"
                   "void copy(char *d, const char *s, unsigned long n) { memcpy(d, s, n); }\n")
    lib = tmp_path / "libpoison.so"
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", "-fno-builtin", "-o", str(lib), str(src)], check=True)
    counts = code_census.census(lib)
    assert counts["memset_calls"] == 1 and counts["memcpy_calls"] == 1 and counts["instructions"] > 2
    assert code_census.census(tmp_path / "missing.so") == {}
    (tmp_path / "text.so").write_text("not a library")
    assert code_census.census(tmp_path / "text.so") == {}
