"""Docker's failures, mapped to verdicts once for every mode of the backend."""

from __future__ import annotations

import re
from datetime import datetime

from docker.errors import DockerException, ImageNotFound
from requests.exceptions import RequestException

from verify_cli.sandbox.base import RunResult, Verdict

SETUP_HINT = "run scripts/setup_docker.sh (installs and starts the Docker engine)"
BUILD_HINT = "build it with scripts/build_images.sh (or docker pull / docker build it)"
#: What a call to the daemon raises when the daemon (not the run) fails.
DAEMON_ERRORS: tuple[type[BaseException], ...] = (DockerException, RequestException, OSError)


class ImageUnfit(DockerException):
    """The image lacks what the backend needs (tar, sleep, sh)."""

    def __init__(self, image: str, detail: str, needs: str = "sh, tar and sleep") -> None:
        super().__init__(f"image {image!r} cannot host verify-cli runs (it needs {needs}): "
                         f"{detail.strip()[-500:]}")


def parse_docker_time(text: str) -> float | None:
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)", text or "")
    if not match:
        return None
    return datetime.fromisoformat(match.group(1) + "+00:00").timestamp()


def short(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text if len(text) <= 300 else text[:300] + "..."


def daemon_failure(backend: str, e: BaseException, image: str | None = None) -> RunResult:
    """The one mapping of a Docker failure to a verdict: a missing or unfit image is the setup's
    fault (``setup_error``), anything else the daemon's (``infra_error``); never the code's."""
    if isinstance(e, ImageNotFound):
        return RunResult(Verdict.SETUP_ERROR, backend,
                         message=f"Docker image {image!r} is not present; {BUILD_HINT}")
    if isinstance(e, ImageUnfit):
        return RunResult(Verdict.SETUP_ERROR, backend, message=str(e))
    return RunResult(Verdict.INFRA_ERROR, backend,
                     message=f"the Docker daemon failed during the run ({short(e)}); "
                             f"check `docker info`, or {SETUP_HINT}")
