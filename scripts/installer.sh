# Sourced by scripts/setup.sh and scripts/setup_vllm.sh (VENV and TARGET_PY set by the caller):
# prepare_installer and pip_install.
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
    if env "${uv_env[@]}" "$UV" pip install -q --python "${TARGET_PY:-$VENV/bin/python}" \
        --index-strategy unsafe-best-match "${uv_args[@]}" "$@"; then
      return 0
    fi
    echo "setup: uv could not install $*; installing with pip" >&2
  fi
  # --no-compile: compileall below does it on every core
  "${TARGET_PY:-$VENV/bin/python}" -m pip install -q --no-compile "$@"
}

pip_uninstall() {
  prepare_installer
  if [ "$use_uv" = 1 ]; then
    env "${uv_env[@]}" "$UV" pip uninstall -q --python "${TARGET_PY:-$VENV/bin/python}" "$@" && return 0
  fi
  "${TARGET_PY:-$VENV/bin/python}" -m pip uninstall -q -y "$@"
}
