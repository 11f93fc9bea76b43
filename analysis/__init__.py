"""heapcost: what memory-allocator hardening costs in speed and memory, and what it buys."""

__version__ = "0.1.0"
