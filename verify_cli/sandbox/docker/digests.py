"""The content digests of images, looked up without a sandbox (the check-tasks cache's key)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from verify_cli.sandbox.docker.errors import DAEMON_ERRORS


def image_digests(images: Iterable[str]) -> dict[str, str]:
    """``{image: "sha256:..."}`` for each of ``images`` present on the local Docker daemon (an
    absent image, or a daemon that does not answer, is left out)."""
    from docker.client import DockerClient
    from docker.errors import DockerException

    out: dict[str, str] = {}
    with contextlib.suppress(DockerException, *DAEMON_ERRORS):
        client = DockerClient.from_env(timeout=30)
        try:
            for image in sorted(set(images)):
                with contextlib.suppress(DockerException, *DAEMON_ERRORS):
                    out[image] = str(client.api.inspect_image(image)["Id"])
        finally:
            client.close()
    return out


__all__ = ["image_digests"]
