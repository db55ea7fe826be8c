#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian/Ubuntu machine: system packages, a virtual environment
# with verify-cli and its dev tools. Safe to run again; does nothing that is already done.
#   VENV=path   where to make the virtual environment (default: .venv in the checkout)
#   EXTRAS=...  pip extras to install (default: dev,distributed,train,humaneval,serve,trl,openenv)
#   VERIFY_VLLM=1  also build the vllm venv ($VENV-vllm: vLLM's CPU build) for the vllm test stage
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
EXTRAS=${EXTRAS:-dev,distributed,train,humaneval,serve,trl,openenv}

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
# pip_install ARGS... (scripts/installer.sh): uv where it can take pip's configuration, else pip
source scripts/installer.sh

stamp="$VENV/.verify-cli-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing verify-cli[$EXTRAS] into $VENV" >&2
  # No compiling while installing, then compileall on every core: pip compiles what it
  # installs on one (63 s of the install here, against 27 s without it), and with
  # PYTHONDONTWRITEBYTECODE set nothing left uncompiled is ever cached: every process would
  # compile it again.
  #   COMPILE_SKIP=REGEX  paths compileall leaves to be compiled when first imported (set by
  #   scripts/test.sh for libraries only the host imports; the sandboxes' interpreters, which
  #   never write bytecode, find everything else compiled)
  pip_install -e ".[$EXTRAS]"
  "$VENV/bin/python" -m compileall -q -j 0 ${COMPILE_SKIP:+-x "$COMPILE_SKIP"} "$VENV/lib" >/dev/null 2>&1 || true
  touch "$stamp"
fi

# Frameworks whose own pins clash with this venv's (verl pins transformers<5.11, verifiers openai<3
# and mcp): each is installed with --no-deps, with only the libraries its adapters' code paths need
# (scripts/extras/NAME.txt, exact pins), into $VENV/verify-extras/NAME. Nothing in the venv changes;
# the adapter tests put the folder on the path of the child process that drives the framework.
#   FRAMEWORKS="verl verifiers"  which to install (FRAMEWORKS= for none)
FRAMEWORKS=${FRAMEWORKS-verl verifiers}
for name in $FRAMEWORKS; do
  req="scripts/extras/$name.txt"
  dest="$VENV/verify-extras/$name"
  if [ ! -f "$dest/.installed" ] || [ "$req" -nt "$dest/.installed" ]; then
    echo "setup: installing $name (scripts/extras/$name.txt) into $dest" >&2
    rm -rf "$dest"
    pip_install --no-deps --target "$dest" -r "$req"
    "$VENV/bin/python" -m compileall -q -j 0 "$dest" >/dev/null 2>&1 || true
    touch "$dest/.installed"
  fi
done
if [ "$use_uv" = 1 ]; then echo "setup: installed with uv (VERIFY_SETUP_PIP=1 for pip)" >&2; fi

# vLLM's CPU build, for the vllm test stage of scripts/test.sh: a venv of its own beside this one
# (scripts/setup_vllm.sh; VERIFY_VLLM=1 builds or checks it).
if [ "${VERIFY_VLLM:-0}" = 1 ]; then
  VENV="$VENV" bash scripts/setup_vllm.sh
fi

# The checkout's own modules too (each CLI start compiled ~250 of them again: 0.62 s -> 0.48 s
# for `verify-cli --help`); compileall only rewrites what changed.
"$VENV/bin/python" -m compileall -q -j 0 verify_cli tests scripts >/dev/null 2>&1 || true
