"""Rendering: the figures' one matplotlib configuration, the products' number formats and files, the
paper's first page, and the paper itself (notebooks run, Typst compiled)."""
