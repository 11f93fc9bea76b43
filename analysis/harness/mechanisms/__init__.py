"""Mechanisms measured beside the time: exact instruction counts under callgrind (callgrind.py, with the
malloccount shim), what a library's machine code holds (code_census.py, reading ELF files through elf.py), and the
store sequences a poisoning free executes, timed alone (store_sequence.py, store_sequence.c)."""
