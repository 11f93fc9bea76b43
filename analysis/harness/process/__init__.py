"""Running one program under an allocator on a described, quiet machine: its environment and trial (trial),
the pinned launcher (launcher, with its C sources beside it: launcher.c, the resolution check mallocwho.c, and
child_io.h, which the campaigns' drivers share), the C helpers built for it (build), the machine it runs on
(machine), whether that machine is quiet (quiet) and its clock, locked where the machine allows (clock_lock);
and the randomized complete blocks every timed loop of the harness runs its cells in (blocks).
The base room: it imports no other room of the harness, and every room may import it."""
