# The candidate-exec runner of images that may lack Python (the docker backend's
# VERIFY_CANDIDATE_EXEC): `sh verify_candidate_exec.sh --channel SOCKET -- PROGRAM ARGS...` runs
# verify_candidate_exec.py under python3 where the image has one, else verify_candidate_exec.js
# under node.
here=$(dirname "$0")
if command -v python3 >/dev/null 2>&1; then exec python3 -I -S "$here/verify_candidate_exec.py" "$@"; fi
if command -v node >/dev/null 2>&1; then
  # The runner's own node must not load the tests' preloads; the program gets them back.
  if [ "${NODE_OPTIONS+set}" = set ]; then
    VERIFY_EXEC_NODE_OPTIONS=$NODE_OPTIONS; export VERIFY_EXEC_NODE_OPTIONS; unset NODE_OPTIONS
  fi
  exec node "$here/verify_candidate_exec.js" "$@"
fi
echo "verify_candidate_exec: the image has neither python3 nor node to reach the candidate sandbox" >&2
exit 127
