"""Publishing: the debates, the results, the security axis, the dataset and the rendering of the paper,
all from the published dataset."""
