"""Rendering: the figures' one matplotlib configuration, the products' number formats and files, the
paper's first page, the one papermill executor (notebook: the paper's analysis notebooks and `python -m analysis
notebook`), and the paper itself (notebooks run, Typst compiled)."""
