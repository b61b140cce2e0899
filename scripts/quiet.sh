# Sourced by the set-up and build scripts: run a step with its output in a log file, shown
# only when the step fails (VERBOSE=1 shows everything as it happens).
#   quietly LOG "what" cmd args...
quietly() {
  local log=$1 what=$2
  shift 2
  if [ "${VERBOSE:-0}" = 1 ]; then
    "$@" 2>&1 | tee -a "$log"
    return "${PIPESTATUS[0]}"
  fi
  if ! "$@" >>"$log" 2>&1; then
    echo "$what failed; its output (also in $log):" >&2
    tail -n 200 "$log" >&2
    return 1
  fi
}
