"""The harness: it measures, and writes data/runs/ and nothing else. Its rooms, each may import those before it
(tests/test_architecture.py holds the order):
- process: running one program under an allocator on a described, quiet machine, and randomized blocks (the base);
- allocators: where allocators come from (the catalogue, brought libraries, the builds provisioning makes);
- workloads: what runs (built-in, brought, the cost check's programs, allocation profiles);
- mechanisms: what is measured beside the time (callgrind counts, code census, store sequences, ELF);
- security: the misuse probes, the primitives they drive and the known techniques;
- timing: campaigns, lockstep pairs and turns from outside;
- bench, fleet: the protocol measured against hyperfine, and campaigns on many hosts.
nbstrip, the notebook filter, is tooling that imports nothing of the package."""
