"""The security probes: the heap-misuse probes (probes.py, built by probe_build.py, their outcomes classified by
probe_verdict.py), the exploitation primitives they drive (primitive_probe.py), and the known techniques a user
brings (techniques.py, classified by technique_verdict.py)."""
