#!/usr/bin/env bash
# The main job on a fresh clone: set up, then prove every sample task sound on the default sandbox.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/verify-cli check-tasks sample_tasks/ "$@"
