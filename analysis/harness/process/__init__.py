"""Running one program under an allocator on a described, quiet machine: its environment and trial (trial),
the pinned launcher (launcher), the C helpers built for it (build), the machine it runs on (machine), whether
that machine is quiet (quiet) and its clock, locked where the machine allows (clock_lock)."""
