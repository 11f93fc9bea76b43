"""A notebook run prints nothing a newcomer cannot act on."""
import pytest


@pytest.mark.paper
def test_a_notebook_runs_without_a_warning_a_newcomer_cannot_act_on(tmp_path):
    """The kernel talks over Unix sockets (no 'running over TCP without encryption'), is not interrupted on
    its way out (no 'KeyboardInterrupt caught in kernel'), and papermill parses every parameter of the
    measure notebook (no 'Unable to parse line')."""
    import subprocess
    import sys

    import nbformat

    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                           "display_name": "Python 3"},
                                            "language_info": {"name": "python"}})
    params = nbformat.v4.new_code_cell('X = 1  # a comment with "quotes" in it')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell("print(X * 2)")]
    nbformat.write(nb, tmp_path / "t.ipynb")
    script = ("from pathlib import Path\nfrom analysis.publish.render import notebook\nimport papermill\n"
              "papermill.inspect_notebook(str(notebook.notebook_path('measure')))\n"
              f"notebook.execute(Path({str(tmp_path / 't.ipynb')!r}), Path({str(tmp_path / 'out.ipynb')!r}), "
              "{'X': 21}, echo=False)\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "" and r.stdout.strip() == ""
    assert nbformat.read(tmp_path / "out.ipynb", 4).cells[-1].outputs[0]["text"] == "42\n"
