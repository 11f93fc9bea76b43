"""heapcost: what memory-allocator hardening costs in speed and memory, and what it buys."""
import sys

__version__ = "0.1.0"

# nbformat (every notebook papermill runs or the paper reads) imports jsonschema, which imports rfc3987_syntax when
# it is installed (JupyterLab's jupyter-events asks for it) to check one string format, IRIs; that module builds
# its grammars at import, about 2 s of every heapcost process that touches a notebook. heapcost checks no IRI:
# the module is marked absent for heapcost's own processes, and jsonschema leaves that one format unchecked.
sys.modules.setdefault("rfc3987_syntax", None)
