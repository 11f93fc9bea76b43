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
