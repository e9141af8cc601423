"""The test tools' versions are pinned in the repository (scripts/test-constraints.txt), so a release made tomorrow
cannot change what CI runs without a commit here: every package pyproject.toml asks for is pinned there, exactly
once, at a version pyproject.toml accepts."""

from __future__ import annotations

import re

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from conftest import REPO_ROOT

CONSTRAINTS = REPO_ROOT / "scripts" / "test-constraints.txt"
NOT_PINNED = {"torch"}  # the user's own build (CPU or CUDA); .ci/run installs its CPU wheel itself


def pins() -> dict[str, Version]:
    pinned: dict[str, Version] = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;]+)", line)
        assert match, f"not an exact pin: {line!r}"
        name = canonicalize_name(match[1])
        assert name not in pinned, f"{name} pinned twice"
        pinned[name] = Version(match[2])
    return pinned


def requirements() -> list[Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(r) for r in (*project["dependencies"], *extras["serve"], *extras["test"])]


def test_every_requirement_of_the_project_and_its_serve_and_test_extras_is_pinned_where_pyproject_allows():
    pinned = pins()
    for requirement in requirements():
        name = canonicalize_name(requirement.name)
        if name in NOT_PINNED:
            assert name not in pinned, f"{name} is the user's own build: pin it nowhere"
            continue
        assert name in pinned, f"{name} is not in {CONSTRAINTS.name}: run scripts/refresh_test_constraints.sh"
        assert requirement.specifier.contains(pinned[name], prereleases=True), \
            f"{name}=={pinned[name]} is outside pyproject.toml's {requirement.specifier}"


def test_the_install_script_and_ci_install_with_the_pins_and_ci_prints_the_versions_it_used():
    install = (REPO_ROOT / "scripts" / "install_test_deps.sh").read_text()
    assert "pip install -q -c scripts/test-constraints.txt -e '.[serve,test]'" in install
    assert "pip freeze" in (REPO_ROOT / ".ci" / "run").read_text()
