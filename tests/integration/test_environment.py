import re

from conftest import REPO


def pins(lines):
    out = {}
    for line in lines:
        m = re.match(r"^\s*(?:-\s*)?([A-Za-z0-9_.\-]+)==([^\s#]+)", line)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def test_environment_yml_and_requirements_txt_pin_the_same_versions():
    req = pins((REPO / "requirements.txt").read_text().splitlines())
    env = pins((REPO / "environment.yml").read_text().splitlines())
    assert req, "requirements.txt pins nothing"
    assert req == env


def test_environment_yml_uses_python_3_11():
    assert re.search(r"^\s*-\s*python=3\.11\s*$", (REPO / "environment.yml").read_text(), re.M)


def test_a_heapcost_process_reads_and_validates_notebooks_without_building_the_iri_grammars():
    import subprocess
    import sys
    code = ("import analysis, nbformat, sys; "
            "nb = nbformat.read('notebooks/measure.ipynb', as_version=4); nbformat.validate(nb); "
            "print(sys.modules.get('rfc3987_syntax'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"
