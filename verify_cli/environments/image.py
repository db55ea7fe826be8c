"""Environments for the docker backend: an image, tagged by the environment's identity.

A Dockerfile environment is ``docker build`` of its folder. Otherwise an image is built from the
base image (``[environment] image``) with a generated Dockerfile: Debian packages with apt-get,
the requirements installed by pip from a wheel folder the host resolved and downloaded first
(with pip's own configuration: builds on machines whose containers cannot reach the package
index over TLS still work, and what was installed is pinned by its files), then the set-up
commands in /workspace holding the starter's files. pip itself comes from that wheel folder
where the base image has none.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from verify_cli.environments.prefix import Say, run_step, tail_of
from verify_cli.environments.spec import EnvironmentSpec
from verify_cli.errors import EnvironmentBuildError

#: The repository of environment images; the tag is the environment's identity.
IMAGE_REPOSITORY = "verify-cli/env"
WHEELS = "/opt/verify-env/wheels"


def image_tag(identity: str) -> str:
    return f"{IMAGE_REPOSITORY}:{identity}"


def docker_client() -> Any:
    from docker.client import DockerClient

    return DockerClient.from_env(timeout=600)


def base_digest(client: Any, image: str) -> str:
    """The content digest of the base image ``image``; LookupError where it is not here."""
    from docker.errors import ImageNotFound

    try:
        return str(client.images.get(image).id)
    except ImageNotFound:
        raise LookupError(f"base image {image!r} is not on this Docker engine "
                          "(build the verify-cli images with scripts/build_images.sh, or docker pull it)") from None


def generated_dockerfile(spec: EnvironmentSpec) -> str:
    """The Dockerfile of an environment declared by requirements, packages and set-up."""
    lines = [f"FROM {spec.base_image}", "USER root",
             f"ENV PIP_NO_INDEX=1 PIP_FIND_LINKS={WHEELS} PIP_BREAK_SYSTEM_PACKAGES=1 "
             "PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore DEBIAN_FRONTEND=noninteractive"]
    if spec.system_packages:
        pkgs = " ".join(shlex.quote(p) for p in spec.system_packages)
        lines.append(f"RUN apt-get update -q && apt-get install -y -q --no-install-recommends {pkgs} "
                     "&& rm -rf /var/lib/apt/lists/*")
    if spec.python:
        check = (f"import sys; v='%d.%d' % sys.version_info[:2]; "
                 f"sys.exit(0 if v == '{spec.python}' else 'the image has Python ' + v + ', "
                 f"the task asks for {spec.python}')")
        lines.append(f"RUN python3 -c {shlex.quote(check)}")
    if spec.requirements or spec.setup:
        lines += [f"COPY wheels {WHEELS}",
                  "RUN python3 -m pip --version >/dev/null 2>&1 || "
                  f"python3 \"$(ls {WHEELS}/pip-*.whl | head -n 1)\"/pip install --no-index pip"]
    if spec.requirements:
        lines += ["COPY requirements.txt /opt/verify-env/requirements.txt",
                  "RUN python3 -m pip install -q -r /opt/verify-env/requirements.txt"]
    if spec.setup:
        lines += ["COPY workspace /workspace", "WORKDIR /workspace"]
        lines += [f"RUN {command}" for command in spec.setup]
        lines += ["RUN chown -R 1000:1000 /workspace"]
    lines += ["USER 1000:1000", "WORKDIR /workspace"]
    return "\n".join(lines) + "\n"


def _download_wheels(spec: EnvironmentSpec, dest: Path, log: IO[str], log_path: Path, identity: str) -> None:
    """Resolve and download the requirements (and pip, setuptools, wheel for set-up) on the host."""
    dest.mkdir()
    wanted = ["pip", "setuptools", "wheel", *spec.requirements]
    req = dest.parent / "download.txt"
    req.write_text("\n".join(wanted) + "\n")
    argv = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
            "-d", str(dest), "-r", str(req)]
    run_step(argv, log, "resolving the requirements", identity, log_path)

def build_image(spec: EnvironmentSpec, identity: str, log: IO[str], log_path: Path, *,
                client: Any, say: Say | None = None) -> dict[str, Any]:
    """Build ``spec`` as the image :func:`image_tag` (identity); returns the manifest's fields."""
    tag = image_tag(identity)
    with tempfile.TemporaryDirectory(prefix="verify-env-image-") as tmp:
        if spec.dockerfile is not None:
            context, dockerfile = spec.dockerfile.parent, spec.dockerfile.name
        else:
            context, dockerfile = Path(tmp), "Dockerfile"
            (context / dockerfile).write_text(generated_dockerfile(spec))
            if spec.requirements or spec.setup:
                if say:
                    say(f"resolving {len(spec.requirements)} requirement(s) on the host")
                _download_wheels(spec, context / "wheels", log, log_path, identity)
            (context / "requirements.txt").write_text("\n".join(spec.requirements) + "\n")
            if spec.setup:
                for rel, src in spec.workspace:
                    dest = context / "workspace" / rel
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, dest)
                (context / "workspace").mkdir(exist_ok=True)
        if say:
            say(f"docker build {tag}")
        log.write(f"$ docker build -t {tag} -f {dockerfile} {context}\n")
        _docker_build(client, context, dockerfile, tag, log, log_path, identity)
    image_id = str(client.images.get(tag).id)
    return {"form": "image", "image": tag, "image_id": image_id, "python": image_python(client, tag),
            "dockerfile": str(spec.dockerfile) if spec.dockerfile else "generated"}


def image_python(client: Any, image: str) -> str | None:
    """The Python interpreter on the image's default PATH as the runs see it ("" where it has
    none), or None where that cannot be told (no ``/bin/sh`` in it, the engine failed)."""
    from docker.errors import DockerException

    probe = "command -v python3 || command -v python || echo NONE"
    try:
        out = client.containers.run(image, ["-c", probe], entrypoint=["/bin/sh"], user="1000:1000",
                                    environment={"PATH": "/usr/local/bin:/usr/bin:/bin"}, network_disabled=True,
                                    remove=True, stdout=True, stderr=False)
    except DockerException:
        return None
    found = out.decode("utf-8", "replace").strip().splitlines()[-1:] if out else []
    if not found:
        return None
    return "" if found[0] == "NONE" else found[0]


def _docker_build(client: Any, context: Path, dockerfile: str, tag: str, log: IO[str], log_path: Path,
                  identity: str) -> None:
    from docker.errors import APIError, BuildError

    failed = ""
    try:
        for chunk in client.api.build(path=str(context), dockerfile=dockerfile, tag=tag, rm=True,
                                      forcerm=True, pull=False, decode=True,
                                      labels={"verify-cli.environment": identity}):
            if "stream" in chunk:
                log.write(str(chunk["stream"]))
            if "error" in chunk:
                failed = str(chunk.get("error") or json.dumps(chunk.get("errorDetail")))
                log.write(f"ERROR: {failed}\n")
    except (APIError, BuildError) as e:
        failed = str(getattr(e, "explanation", None) or e)
        log.write(f"ERROR: {failed}\n")
    log.flush()
    if failed:
        tail = tail_of(log_path)
        raise EnvironmentBuildError(identity, f"docker build failed: {_one_line(failed)}", log=str(log_path),
                                    tail=tail)


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else text)[:300]


__all__ = ["IMAGE_REPOSITORY", "base_digest", "build_image", "docker_client", "generated_dockerfile", "image_python",
           "image_tag"]
