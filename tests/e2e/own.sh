# tests/e2e/own.sh — sourced by lib.sh and netns.sh.
#
# e2e_own PID: whether PID is still a child of this script. A process that
# ended long ago may have left its PID to another test's process (pid_max
# may be 32768, and a suite starts far more processes than that: a test's
# cleanup once SIGKILLed another test's broker): that one is not ours to kill.
e2e_own() {
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }          # past "PID (comm) ": state, ppid, ...
    set -- $s
    [ "${2:-}" = "$$" ]
}
