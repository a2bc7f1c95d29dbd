# shellcheck shell=bash disable=SC2154,SC2168,SC2064 # sourced by the `trap` function with the caller's arguments, or by the hook with __rf_m set (notes at the end)
if [[ -z ${__rf_m-} ]]; then builtin local __rf_y=0; builtin trap "$@" || __rf_y=$?; [[ $BASHPID == "$$" ]] || builtin return "$__rf_y"; fi
__rf_e=
__rf_a=
if [[ -n ${__rf_m-} ]]; then
  # The fork the function avoids. `trap -p` quotes as sh_single_quote does (' as '\'').
  __rf_o=$(builtin trap -p EXIT)
  __rf_a=${__rf_o#"trap -- '"}
  __rf_a=${__rf_a%"' EXIT"}
  __rf_a=${__rf_a//"'\\''"/"'"}
  [[ $__rf_a == @OURS@ ]] || __rf_e=1
else
  __rf_i=1
  if [[ ${1-} == -- ]]; then
    __rf_i=2
  elif [[ ${1-} == -?* ]]; then
    __rf_i=0
  fi
  if ((__rf_i && __rf_i <= $#)); then
    __rf_a=${!__rf_i}
    __rf_o=${__rf_a#"${__rf_a%%[!0]*}"}
    if [[ -n $__rf_a && $__rf_a != *[!0-9]* ]] && ((${#__rf_o} < 3 && 10#0$__rf_o < 65)); then
      __rf_a=
    elif ((__rf_i == $#)); then
      __rf_a=
    else
      __rf_i=$((__rf_i + 1))
      [[ $__rf_a != - ]] || __rf_a=
    fi
    while ((__rf_i <= $#)); do
      __rf_o=${!__rf_i}
      if [[ ${__rf_o^^} == EXIT ]]; then
        __rf_e=1
      else
        __rf_o=${__rf_o#"${__rf_o%%[![:space:]]*}"}
        __rf_o=${__rf_o#[-+]}
        __rf_o=${__rf_o%"${__rf_o##*[!$' \t']}"}
        [[ -z $__rf_o || $__rf_o == *[!0]* ]] || __rf_e=1
      fi
      __rf_i=$((__rf_i + 1))
    done
  fi
fi
if [[ -n $__rf_e ]]; then
  [[ $__rf_a != @OURS@* ]] || __rf_a=${__rf_a#@OURS@}
  __rf_a=${__rf_a#"${__rf_a%%[!;[:space:]]*}"}
  if [[ -n $__rf_a ]]; then
    builtin trap -- @OURS@"; $__rf_a" EXIT
  else
    builtin trap -- @OURS@ EXIT
  fi
fi
builtin unset __rf_e __rf_a __rf_o __rf_i
if [[ -n ${__rf_m-} ]]; then
  [[ -n ${__rf_w-} ]] || builtin unset -f trap
  builtin unset __rf_w __rf_m
fi
builtin return "${__rf_y-0}"

# repeat-failure neutral route, chained (C-AC16): the hook's EXIT trap in front of the original's.
# These notes come after the code: bash parses a sourced file only up to the `return` it runs.
#
# A chained hook (hook/<agent>.sh rendered with the agent's original BASH_ENV) sets its own EXIT
# trap, defines `trap` as a function and sources the original, so an error in the original (an
# unset variable under set -u, say) never stops the record. The function sources this file with the
# trap's arguments. Its first command takes the common form, `trap ACTION EXIT`, in the shell that
# records: it sets "OURS_C; ACTION" at once (an ACTION starting with `-`, a digit or `{`, which may
# be an option, a signal number or the hook's own trap read back, takes the general path).
# Otherwise the builtin does what was asked (its messages and status are the caller's) and, in that
# shell (not in a subshell or a command substitution, whose EXIT trap is their own), an EXIT trap
# just set gets the hook's put in front. After the original, the function and the __rf_* names are
# removed before the command runs. Reading `trap -p EXIT` back instead would fork in every agent
# shell (docs/neutral-route.md); that is done only when the function could not be used (__rf_m set,
# no arguments): `trap` was a function already (one exported into the environment) or the original
# turned on POSIX mode, where special builtins are found before functions.
#
# Known limits: an original that calls `builtin trap` or `command trap` bypasses the function, so
# its EXIT trap replaces the hook's as a command's own EXIT trap does, and that shell is not
# recorded (C12's "not receiving data" shows a route gone quiet); an original that defines its own
# function named `trap` loses it when the hook removes the one it defined.
#
# The EXIT trap left is OURS alone or "OURS_C; ORIG": OURS the hook's trap (rendered in), OURS_C
# the same group ending `&& builtin :`, ORIG what the original set. The hook's exit path returns
# the command's status, so ORIG sees the command's $? without `(exit N)`, which forks and, failing
# under set -e, would end the trap before ORIG ran; a failing status on the left of `&&` cannot
# trip errexit. ORIG runs after the record is written, with the umask 007 the record file needs
# (and LC_ALL=C when the record took the slow path). An ORIG that starts with the trap it found
# (the "append to the EXIT trap" idiom) has that part dropped, so the record is written once.
# Ignoring EXIT ('') or resetting it ('-', or naming it alone) leaves OURS alone.
#
# The general part reads "$@" as bash 5.2's trap builtin does (builtins/trap.def): options (-l, -p,
# --help, a bad one) only print; after an optional `--`, a first argument of digits naming a signal
# (below NSIG, 65 on Linux), or a lone argument, resets the signals named; otherwise the first
# argument is the action ('' ignores, '-' resets) for the others. EXIT is `exit` in any case or a
# number equal to 0 (strtoimax: leading white space and a sign, trailing blanks). The function
# sources this file with the caller's options (errexit, nounset): every test is in a condition and
# every expansion has a default.
