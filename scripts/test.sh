#!/usr/bin/env bash
# Set up everything the tests need (bubblewrap, the Docker engine and the sandbox images) and run
# the whole suite. Docker set-up is skipped only when VERIFY_SKIP_DOCKER=1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${VERIFY_SKIP_DOCKER:-0}" != 1 ] && [ -f scripts/setup_docker.sh ]; then
  bash scripts/setup_docker.sh
  if [ -f scripts/build_images.sh ]; then
    PATH="$PWD/.venv/bin:$PATH" bash scripts/build_images.sh
  fi
fi
export PATH="$PWD/.venv/bin:$PATH"
ruff check verify_cli tests scripts
mypy verify_cli
# loadgroup: tests sharing a costly module fixture (the local Ray cluster) stay on one worker.
exec python -m pytest -n 2 --dist loadgroup "$@"
