"""The first ten minutes: the README says how to use the package in one's own Jupyter, and the
package does not drag a notebook frontend into a kernel's environment."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_shows_install_load_and_a_first_cell() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use it in your own Jupyter", 1)[1].split("\n## ", 1)[0]
    assert "pip install" in section
    assert "%load_ext tinyagents_nb" in section
    assert "%%agent\n" in section
    assert "%env OPENAI_API_KEY=" in section


def test_jupyterlab_is_an_extra_not_a_runtime_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = [spec.split(">")[0].split("=")[0].strip().lower() for spec in project["dependencies"]]
    assert "jupyterlab" not in runtime
    assert "notebook" not in runtime
    assert any(spec.startswith("jupyterlab") for spec in project["optional-dependencies"]["lab"])
