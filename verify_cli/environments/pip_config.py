"""Print the uv options that make ``uv pip install`` read the packages pip would, one per line.

pip's own configuration (files and ``PIP_*`` variables, as ``pip config list`` reports them,
the variables winning) is translated: index-url, extra-index-url, find-links, constraint and
no-index. A setting uv cannot be given here (a proxy, a trusted host, a client certificate, a
user name in an index) exits 3: ``scripts/setup.sh`` then installs with pip, as before. The
certificate bundle (``cert``) is printed as ``SSL_CERT_FILE=PATH`` for the caller's environment.

Usage: python verify_cli/environments/pip_config.py   (run by the venv's python: its pip is
asked; standard library only, so scripts/setup.sh runs it before verify-cli is installed).
Environments (:mod:`verify_cli.environments`) build with the same translation
(:func:`uv_install_options`).
"""

from __future__ import annotations

import shlex
import subprocess
import sys

#: pip keys with a uv option: the option, and whether the value is a space-separated list.
MAPPED = {"index-url": ("--index-url", False), "extra-index-url": ("--extra-index-url", True),
          "find-links": ("--find-links", True), "constraint": ("--constraint", True)}
#: pip keys that change nothing about which files are installed.
HARMLESS = {"timeout", "default-timeout", "disable-pip-version-check", "progress-bar", "quiet",
            "verbose", "no-color", "retries", "root-user-action", "no-cache-dir", "cache-dir",
            "require-virtualenv", "break-system-packages", "no-input", "prefer-binary"}


def settings(listing: str) -> dict[str, str]:
    """``pip config list`` lines (``scope.key='value'``): environment variables (``:env:``)
    win over files, later files over earlier ones, as pip reads them."""
    files: dict[str, str] = {}
    env: dict[str, str] = {}
    for line in listing.splitlines():
        name, sep, raw = line.partition("=")
        if not sep or "." not in name:
            continue
        scope, key = name.rsplit(".", 1)
        value = " ".join(shlex.split(raw))
        (env if scope.startswith(":env:") else files)[key] = value
    return {**files, **env}


def uv_arguments(conf: dict[str, str]) -> list[str] | None:
    """The uv options for ``conf``, or None where a setting has no uv equivalent here."""
    out: list[str] = []
    for key, value in conf.items():
        if key in MAPPED:
            option, many = MAPPED[key]
            for item in (value.split() if many else [value]):
                if "@" in item.split("://", 1)[-1].split("/", 1)[0]:
                    return None  # credentials in an index URL: leave it to pip
                out.append(f"{option}={item}")
        elif key == "no-index":
            if value.lower() in ("1", "true", "yes", "on"):
                out.append("--no-index")
        elif key == "cert":
            out.append(f"SSL_CERT_FILE={value}")
        elif key not in HARMLESS:
            return None
    return out


def uv_install_options(python: str = sys.executable) -> list[str] | None:
    """The uv options (and ``SSL_CERT_FILE=`` lines) for the pip of ``python``, or None where
    pip cannot be asked or a setting has no uv equivalent (then install with pip)."""
    try:
        listing = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True,
                                 text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listing.returncode != 0:
        return None
    return uv_arguments(settings(listing.stdout))


def main() -> int:
    args = uv_install_options()
    if args is None:
        return 3
    print("\n".join(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
