# Sourced by scripts/test.sh and scripts/setup_test.sh: commands that run in the background
# while the script goes on, each in a session of its own so that stopping its process group
# reaches every process it started, with its output in a log of its own.
#   background_start NAME [--nice N] COMMAND...: starts COMMAND as job NAME, at nice value N
#     (0 to 19; default 0) for its session: with the kernel's autogroup scheduling (Debian's
#     default) a new session is a scheduling group of its own that gets an equal share of the
#     CPU whatever its processes' nice values; the group's own nice value
#     (/proc/self/autogroup) is what lowers it. A group at 10 gets about a tenth of what one
#     at 0 gets when both want the CPU, one at 19 about a seventieth (a seventh of one at 10).
#   background_wait NAME: waits for job NAME; on success prints the last lines of its log, on
#     failure all of it, and exits 1.
# The sourcing script's EXIT trap must call background_cleanup (it stops what still runs and
# removes the logs).
background_logs=$(mktemp -d)
declare -A background_pids=()

background_start() {
  local name=$1 nice=0
  shift
  [ "$1" = --nice ] && { nice=$2; shift 2; }
  setsid bash -c '[ "$0" = 0 ] || { echo "$0" > /proc/self/autogroup; } 2>/dev/null
exec nice -n "$0" "$@"' "$nice" "$@" >"$background_logs/$name.log" 2>&1 &
  background_pids[$name]=$!
}

background_wait() {
  local name=$1 status=0
  wait "${background_pids[$name]}" || status=$?
  unset "background_pids[$name]"
  if [ "$status" != 0 ]; then
    cat "$background_logs/$name.log"
    echo "$(basename "$0"): $name failed" >&2
    exit 1
  fi
  tail -n 5 "$background_logs/$name.log"
}

background_cleanup() {
  local pid
  for pid in "${background_pids[@]}"; do
    kill -- -"$pid" 2>/dev/null || true
  done
  rm -rf "$background_logs"
}
