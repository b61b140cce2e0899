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

# Installs the Debian packages not installed yet (apt-get, through sudo when not root), quietly
# into LOG; a second call with nothing missing does nothing.
#   apt_install_missing LOG package...
apt_install_missing() {
  local log=$1 pkg sudo=""
  shift
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: apt-get install ${missing[*]}"
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  quietly "$log" "setup: apt-get update" $sudo apt-get update -qq
  quietly "$log" "setup: apt-get install" \
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
}
