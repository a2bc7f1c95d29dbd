# shellcheck shell=bash
builtin trap '' DEBUG RETURN ERR XFSZ
builtin set +ex
__rf_x=$1 __rf_t=${EPOCHREALTIME-} __rf_r=${BASH_EXECUTION_STRING-}
builtin umask 007
__rf_t=${__rf_t/,/.} __rf_c=${__rf_r//\\/\\\\} __rf_c=${__rf_c//\"/\\\"} __rf_l='{"v":1,"ts":'$__rf_t',@PREFIX_SQ@,"exit":'$__rf_x',"cmd":"'"$__rf_c"'"}'
if [[ -n $__rf_t && $__rf_r != *[[:cntrl:]]* && ${#__rf_l} != ????* ]]; then [[ -L @RECORDS@ || -p @RECORDS@ || -S @RECORDS@ || -c @RECORDS@ || -b @RECORDS@ ]] || builtin printf '%s\n' "$__rf_l" >>@RECORDS@; builtin return "$__rf_x"; fi
# Slow path: a control character, a line of 1,000 characters or more, or no EPOCHREALTIME (bash
# < 5: whole seconds). From here lengths and cuts count bytes.
# shellcheck disable=SC2016 # the single quotes match Droid's script text, not an expansion
[[ $0 != factory-execute-supervisor || $__rf_r != *'"$command_shell" -c "$command$quoted_args"'* ]] || __rf_r=${command-}${quoted_args-}
LC_ALL=C
[[ -n $__rf_t ]] || builtin printf -v __rf_t %\(%s\)T -1
__rf_h="{\"v\":1,\"ts\":$__rf_t,@PREFIX@,\"exit\":$__rf_x"
__rf_k=
# Room for the escaped command and ',"cut":true' (11 bytes): 4096 minus the newline, the
# '"}' closing the line and the ',"cmd":"' before the command.
__rf_b=$((4085 - ${#__rf_h}))
if ((${#__rf_r} > __rf_b)); then
  __rf_k=',"cut":true'
  __rf_b=$((__rf_b - 11))
  __rf_r=${__rf_r:0:__rf_b}
  __rf_n=1
else
  __rf_n=
fi
while :; do
  if [[ -n $__rf_n ]]; then
    # Drop a UTF-8 sequence the cut left incomplete: a lead byte missing its continuation bytes.
    case $__rf_r in
      *[$'\xc0'-$'\xff']) __rf_r=${__rf_r%?} ;;
      *[$'\xe0'-$'\xff'][$'\x80'-$'\xbf']) __rf_r=${__rf_r%??} ;;
      *[$'\xf0'-$'\xff'][$'\x80'-$'\xbf'][$'\x80'-$'\xbf']) __rf_r=${__rf_r%???} ;;
    esac
  fi
  __rf_c=${__rf_r//\\/\\\\}
  __rf_c=${__rf_c//\"/\\\"}
  __rf_c=${__rf_c//$'\n'/\\n}
  __rf_c=${__rf_c//$'\t'/\\t}
  __rf_c=${__rf_c//$'\r'/\\r}
  if [[ $__rf_c == *[$'\001'-$'\037']* ]]; then
    for __rf_i in 1 2 3 4 5 6 7 8 11 12 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31; do
      builtin printf -v __rf_o %02x "$__rf_i"
      builtin printf -v __rf_y %b "\\x$__rf_o"
      __rf_c=${__rf_c//"$__rf_y"/\\u00$__rf_o}
    done
  fi
  ((${#__rf_c} <= __rf_b)) && break
  if [[ -z $__rf_k ]]; then
    __rf_k=',"cut":true'
    __rf_b=$((__rf_b - 11))
  fi
  # Shrink in proportion to how much escaping grew the text; always by at least one byte.
  __rf_i=$((${#__rf_r} * __rf_b / ${#__rf_c}))
  ((__rf_i < ${#__rf_r})) || __rf_i=$((${#__rf_r} - 1))
  __rf_r=${__rf_r:0:__rf_i}
  __rf_n=1
done
__rf_l="$__rf_h$__rf_k,\"cmd\":\"$__rf_c\"}"
[[ -L @RECORDS@ || -p @RECORDS@ || -S @RECORDS@ || -c @RECORDS@ || -b @RECORDS@ ]] || builtin printf '%s\n' "$__rf_l" >>@RECORDS@
builtin return "$__rf_x"

# repeat-failure neutral route: the hook's exit path. The hook (hook/<agent>.sh) sets an EXIT trap
# that sources this file inside a group with stdout and stderr on /dev/null, on the left of `&&`
# (errexit cannot fire), through `command` (in POSIX mode `.` of a missing file, the check turned
# off meanwhile, would otherwise end the shell with status 1), with the command's status as $1
# (saved in __rf_x); a chained hook sources it without `command` (through it, errexit stays on in
# here). The file returns __rf_x, which a chained hook's
# trap passes on to the original's EXIT trap (hooks/bash_env.trap.bash).
#
# Its first two commands set aside what would otherwise see its steps (issue 28): the command's
# DEBUG and RETURN traps (ignored, not reset: `.` puts back a DEBUG trap that is unset when it
# returns) and SIGXFSZ (ignored: an append past a `ulimit -f` the command set would kill the
# shell with status 153; the write then fails with EFBIG and leaves at most part of a line, which
# the sidecar's collector reads as torn without losing the next record), then errexit and xtrace
# (with BASH_XTRACEFD set, the trace bypasses the group's redirection); the unchained exit path
# also ignores ERR (`.` run by `command` would set off the command's ERR trap by returning a
# failed status). A command's DEBUG trap still
# runs before the trap's `command` and the `.` it runs, and with `set -T` before the first line
# here; its xtrace shows the trap's `.` line and these two (docs/neutral-route.md, "Known
# limits"). Chained, the render leaves ERR, errexit and xtrace alone (its steps are traced, as
# before) and puts DEBUG, RETURN and SIGXFSZ back to their defaults before each `return`, so the
# original's EXIT trap runs as it would alone. Bash parses a
# sourced file only up to the `return` it runs, so the common record is written by the lines at the
# top and the slow path follows; the render drops every comment line, these notes included (a
# comment costs parse time too). Keeping the code here rather than in the trap string keeps what
# every bash start reads short. Measured with callgrind (instructions of `bash -c true`, the figure
# to compare), bash spends several hundred instructions per byte it parses and tens of thousands
# on each command however small, so the fast path puts its assignments together (one simple
# command assigns left to right, each seeing the ones before) and tests with one `[[ ]]`.
#
# The fast path works in the caller's locale (setting LC_ALL costs a setlocale, and a chained
# original's EXIT trap runs after this one): ${#__rf_l} then counts characters, and a line of
# fewer than 1,000 characters (a length of at most three digits, a pattern test: no arithmetic
# code to load) is at most 3,996 bytes (4 bytes a character at most). A longer line, a control
# character in the command (the rest of the line, numbers and the agent and backend names the
# sidecar validates, never holds one) or no EPOCHREALTIME takes the slow path.
#
# The hook's contract (docs/neutral-route.md, spec C1, C8 and C-AC14):
#   * bash sources the hook before every non-interactive command (bash -c / -lc, scripts) with
#     the caller's options (-e, -u, pipefail, -x, -v) already on, so its top level is one group
#     with stderr on /dev/null (hides -x tracing), uses `${x-}` everywhere and cannot fail;
#   * it records only in a shell with a non-empty $BASH_EXECUTION_STRING, once per agent
#     command: REPEAT_FAILURE_MARK holds the PID of the shell that owns the agent command; a
#     nested shell sees another PID and stays silent, an exec'd `bash -c` keeps the PID (the
#     outer EXIT trap never fires) and takes over; a marker whose shell no longer exists is
#     stale (Codex saves the exported environment of a helper shell into a snapshot that every
#     later tool shell loads before it execs `bash -c <cmd>`) and is replaced;
#   * a shell that is PID 1 (a container's `command: [bash, -c, "agent ..."]`) or whose parent is
#     outside the PID namespace (PPID 0: `kubectl exec ... bash -c`) launches the agent rather than
#     running an agent command: it neither records nor sets the marker, which would otherwise make
#     every shell the agent starts look nested;
#   * nothing visible but the EXIT trap and that one variable: no functions, options, IFS or
#     umask changes at the top level. What the trap sets (umask 007, LC_ALL=C on the slow path,
#     __rf_* variables, the command's DEBUG/RETURN traps and SIGXFSZ ignored, xtrace off) happens
#     after the command is done;
#   * never change stdout, stderr or the exit status: the trap's output goes to /dev/null, every
#     step may fail (`|| :`; `[[ ]]`/`(( ))` so a command's IFS cannot split our numbers), and
#     bash exits with the status the trap started with. The trap calls `builtin umask` etc.: by
#     the time it runs, the command may have defined functions named like builtins;
#   * one JSON line per record, at most 4096 bytes including the newline, appended by one
#     `printf` (one write(2)); the record file is created 0660 (umask 007 inside the trap), and
#     only a regular file (or none) at the record path is opened: a symlink is never written
#     through, and a FIFO, which would block the open until a reader came, a socket or a device
#     is left alone (a file swapped in between the test and the open is not caught: bash cannot
#     open with O_NOFOLLOW or O_NONBLOCK). The test only ever says yes to a type that is not a
#     regular file: the collector renames the file away and another shell creates it again at
#     any moment, so a test like "a regular file, or nothing there" can see neither in turn and
#     drop a good record (1 of 1,000 in tests/test_collector.py, 3 runs in 10).
#
# Factory Droid (0.215.0) runs each agent command as `bash -c '<supervisor script>'
# factory-execute-supervisor <owner pid> /bin/bash <cmd>`: the script keeps `command=$3` (and any
# further arguments, quoted, in `quoted_args`), runs `"$command_shell" -c "$command$quoted_args"`
# as a nested shell (which stays silent: the marker is ours) and exits with its status. So the
# record of a shell whose $0 is factory-execute-supervisor and whose script has that line is the
# text the inner shell ran, `$command$quoted_args`, with the status the script exits with (the
# inner command's). By the time this file runs the command is done, so reading the script's
# variables changes nothing it can see. The script has newlines, so such a shell always takes the
# slow path, and the test sits at its top: the fast path (every other command) pays nothing.
#
# Slow path. Inputs: __rf_h (the record up to and including "exit"), __rf_r (the raw command).
# Output: __rf_l, the whole record line without its newline. LC_ALL=C is on, so lengths and cuts
# count bytes; the raw command is cut before escaping (never the escaped text), and a cut never
# leaves a partial UTF-8 sequence at the end (a valid command stays valid UTF-8).
