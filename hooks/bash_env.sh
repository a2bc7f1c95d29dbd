# repeat-failure neutral route (BASH_ENV hook), rendered for agent @AGENT@.
# Bash sources this file before it runs a non-interactive command (bash -c / -lc), with the
# caller's options (-e, -u, pipefail, -v) already on. The contract (DESIGN.md, HOOK-NOTES.md):
#   * record only in a shell with a non-empty $BASH_EXECUTION_STRING, once per agent command:
#     REPEAT_FAILURE_MARK holds the PID of the shell that owns the agent command; a nested shell
#     sees another PID and stays silent, an exec'd `bash -c` keeps the PID and takes over;
#   * leave nothing visible but the EXIT trap and that one variable: no functions, options,
#     IFS or umask changes at the top level; what the trap sets runs after the command is done;
#   * never change stdout, stderr or the exit status: every step may fail silently (`|| :`),
#     stderr of the whole trap goes to /dev/null, and bash keeps the status the trap started with;
#   * one JSON line per record, at most 4096 bytes, appended in one write(2).
# The fast path below handles commands without control characters that fit in one line; the
# rest (newlines, tabs, cutting) lives in @SLOW@, read only when needed.
[ -n "${BASH_EXECUTION_STRING-}" ] && { [ -z "${REPEAT_FAILURE_MARK-}" ] || [ "${REPEAT_FAILURE_MARK-}" = "$$" ]; } && { export REPEAT_FAILURE_MARK=$$; trap '{ __rf_x=$?; LC_ALL=C; umask 007; __rf_t=${EPOCHREALTIME/,/.}; [ -n "$__rf_t" ] || printf -v __rf_t %\(%s\)T -1; __rf_c=${BASH_EXECUTION_STRING//\\/\\\\}; __rf_c=${__rf_c//\"/\\\"}; __rf_h="{\"v\":1,\"ts\":$__rf_t,@PREFIX@,\"exit\":$__rf_x"; __rf_l="$__rf_h,\"cmd\":\"$__rf_c\"}"; case $__rf_l in *[[:cntrl:]]*) __rf_l=; . @SLOW@;; *) [ ${#__rf_l} -lt 4096 ] || { __rf_l=; . @SLOW@; };; esac; [ -n "$__rf_l" ] && builtin printf "%s\n" "$__rf_l" >>@RECORDS@; } 2>/dev/null || :' EXIT; } || :
