#!/usr/bin/env bash
# Build the verify-cli Docker images (verify-cli/python:3.11, verify-cli/node:20).
#
#   scripts/build_images.sh                 # build the missing images
#   scripts/build_images.sh --force node    # rebuild one
#   scripts/build_images.sh --offline       # never pull: debootstrap + docker import (needs root)
#
# Images that exist are skipped. Where a registry answers, the images are built from docker/*;
# otherwise (or when that fails) offline from a cached debootstrap root file system
# (VERIFY_CLI_CACHE_DIR, default /var/cache/verify-cli; mirror: VERIFY_CLI_DEBIAN_MIRROR).
# Needs a running Docker daemon: see scripts/setup_docker.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON="$(command -v python3 || command -v python)"; fi
fi
if ! "$PYTHON" -c 'import docker' 2>/dev/null; then
    echo "build_images: $PYTHON cannot import the docker SDK; install verify-cli (pip install -e .) or set PYTHON=" >&2
    exit 2
fi
exec "$PYTHON" -m verify_cli.sandbox.images "$@"
