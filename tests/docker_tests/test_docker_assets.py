"""Issue 20: the image builds where npm's registry cannot be reached, and the running stack says what is missing.

The registry is made unreachable inside the build only, the way a user points npm at a mirror: the build
argument LIGHTX2V_NPM_REGISTRY names a closed loopback port (builds use host networking). pip still works, so
the stage gets as far as npm. The other case of that issue, a base whose proxy CA is only in its system
bundle, is the default image of test_docker_e2e.py (the stand-in base has no NODE_EXTRA_CA_CERTS).
"""

from __future__ import annotations

import os

import pytest

from lightx2v.assets import IMAGE_COMMAND, IMAGE_SERVICE, WEBCOMPONENTS

from .stack import OWNER_GID, OWNER_UID, TIMINGS, build, free_port, start_stack
from .traces import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]

WARNING = "assets: WARNING"
MISSING = "the offline Timeline is missing"
ADD_COMMAND = f"docker compose exec {IMAGE_SERVICE} {IMAGE_COMMAND} install"


def closed_registry() -> str:
    """An npm registry URL on a loopback port nothing listens on (connection refused)."""
    return f"http://127.0.0.1:{free_port()}/"


@pytest.fixture(scope="module")
def image_without_assets(docker_engine, standin_base, project, image):
    """The project's image built with the registry unreachable. It asks for the session's image first (built
    anyway by the other Docker tests), so its dependency layer is in the cache and this build only runs the
    assets stage and the package layer (83 s cold, seen when this file ran first)."""
    tag = f"lightx2v-test-image:{os.getpid()}-no-assets"
    seconds, output = build(docker_engine, project, standin_base, tag,
                            "--build-arg", f"LIGHTX2V_NPM_REGISTRY={closed_registry()}")
    TIMINGS["image build with no npm registry"] = f"{seconds:.1f} s"
    yield tag, output
    docker_engine.run("rmi", "-f", tag, check=False)


def test_without_a_registry_the_image_builds_with_one_warning(image_without_assets):
    _, output = image_without_assets
    warnings = [line for line in output.splitlines() if WARNING in line]
    assert len(warnings) == 1, output
    assert "ECONNREFUSED" in warnings[0] and "--build-arg LIGHTX2V_REQUIRE_ASSETS=1" in warnings[0], warnings


def test_the_stack_says_the_timeline_is_missing_and_its_command_adds_it(docker_engine, image_without_assets,
                                                                         project, tmp_path):
    checkout = tmp_path / "LightX2V"  # a user's checkout (its own `lightx2v`): nothing runs at start
    (checkout / "lightx2v").mkdir(parents=True)
    for path in (checkout, checkout / "lightx2v"):
        os.chown(path, OWNER_UID, OWNER_GID)
    stack = start_stack(docker_engine, image_without_assets[0], project, f"lx2v-no-assets-{os.getpid()}",
                        LIGHTX2V_PATH=str(checkout))
    try:
        logs = wait_for("the notice in the log", lambda: MISSING in (text := stack.logs()) and text, 60)
        assert logs.count(MISSING) == 1 and ADD_COMMAND in logs, logs
        page = stack.get_text(stack.browser_port, "/")
        assert "id=offline-notice class=missing" in page and ADD_COMMAND in page and WEBCOMPONENTS.spec in page

        added = stack.exec(*ADD_COMMAND.split()[4:], timeout=600)  # inside: lightx2v-assets install
        assert f"installed {WEBCOMPONENTS.spec}" in added.stdout, added.stdout + added.stderr
        page = stack.get_text(stack.browser_port, "/")
        assert "id=offline-notice class=ok" in page and ADD_COMMAND not in page
        assert "@license" in stack.get_text(stack.browser_port, "/assets/" + WEBCOMPONENTS.file)
    finally:
        if stack.container_ids():
            stack.compose("down", check=False)


def test_the_build_argument_makes_the_asset_mandatory(docker_engine, standin_base, project):
    tag = f"lightx2v-test-image:{os.getpid()}-required"
    result = docker_engine.run("build", "--network", "host", "--build-arg", f"BASE_IMAGE={standin_base}",
                               "--build-arg", f"LIGHTX2V_NPM_REGISTRY={closed_registry()}",
                               "--build-arg", "LIGHTX2V_REQUIRE_ASSETS=1", "-t", tag, str(project), check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "ECONNREFUSED" in output and WARNING not in output, output
    assert not docker_engine.image_exists(tag)
