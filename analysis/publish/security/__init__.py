"""The security axis: the defence table, the exploitation primitives, the security scores and their
figures, and the trade-off fronts against speed."""
