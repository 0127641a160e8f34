"""environment.yml (conda users) and pyproject.toml (pip users) must list the same packages."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def package_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower()


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pyproject = {package_name(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]}
    text = (ROOT / "environment.yml").read_text()
    pip_section = text.split("- pip:", 1)[1]      # the pip packages are listed under "- pip:"
    conda = {package_name(line) for line in re.findall(r"^\s+- ([A-Za-z]\S*)\s*$", pip_section, re.MULTILINE)}
    assert conda == pyproject, (f"only in environment.yml: {conda - pyproject}; "
                                f"only in pyproject.toml: {pyproject - conda}")


def test_constraints_pin_every_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {package_name(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]}
    pinned = {package_name(line) for line in (ROOT / "constraints.txt").read_text().splitlines()
              if "==" in line and not line.startswith("#")}
    assert wanted <= pinned, f"not pinned in constraints.txt: {wanted - pinned}"
    assert "torch==2.13.0" in (ROOT / "constraints.txt").read_text()


def test_supported_pythons_are_the_ones_the_corpus_was_checked_on():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11,<3.14"          # 3.11-3.13: the corpus hash checked on each
    assert re.search(r"^\s+- python=3\.11\b", (ROOT / "environment.yml").read_text(), re.MULTILINE)
