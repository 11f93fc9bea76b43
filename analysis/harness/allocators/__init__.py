"""Where allocators come from: the catalogue (allocators.toml) and how an entry is resolved on this machine,
the libraries users bring, the builds provisioning makes (Debian source packages: perl, mimalloc, mozjemalloc,
the system's glibc) and the cache outside the clone that holds them. A campaign asks `catalog.select` and
`catalog.resolve`; nothing else in the harness needs to know how an allocator got here. The poisoning build's
check (free_poison_check.c) sits beside mozjemalloc_build, which builds it."""
