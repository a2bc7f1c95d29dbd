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
# The render drops every comment line (bash parses comments too); these notes stay here.
#
# A chained hook (hook/<agent>.sh, rendered from bash_env.chain.bash around bash_env.sh's test and
# commands) sets its own EXIT trap, defines `trap` as a function and sources the original, so an
# error in the original (an unset variable under set -u, say) never stops the record. The function
# takes the common form itself, `trap ACTION EXIT` in the shell that records: it sets
# "OURS; ACTION" at once (an ACTION starting with `-`, a digit or `{`, which may be an option, a
# signal number or the hook's own trap read back, takes the general path). Every other call
# sources this file with the trap's arguments (or, with this file gone, calls the builtin): the
# builtin does what was asked (its messages and status are the caller's) and, in that shell (not in
# a subshell or a command substitution, whose EXIT trap is their own), an EXIT trap just set gets
# the hook's put in front. After the original, the function and the __rf_* names are removed
# before the command runs. Reading `trap -p EXIT` back instead would fork in every agent shell
# (docs/neutral-route.md); that is done only when the function could not be used (the hook sources
# this file with __rf_m set and no arguments of its own): `trap` was a function already (one
# exported into the environment, __rf_w=1) or the original turned on POSIX mode, where special
# builtins are found before functions.
#
# The hook's state, in __rf_w: unset in the shell that records with the hook's `trap` function
# defined; 1 there when `trap` was a function already (`builtin export -f trap` succeeds only for a
# function, and one from the environment is exported already, so it changes nothing; it prints
# nothing to stdout, unlike `declare -F`, whose stdout would need a redirection: eight system
# calls); 0 in a shell that does not record. The common case, unset and no POSIX mode, removes the
# function and `return`s from the hook, so bash never parses the rarer clean-up after it.
#
# Known limits: an original that calls `builtin trap` or `command trap` bypasses the function, so
# its EXIT trap replaces the hook's as a command's own EXIT trap does, and that shell is not
# recorded (C12's "not receiving data" shows a route gone quiet); an original that defines its own
# function named `trap` loses it when the hook removes the one it defined; an original that lists
# the traps (`trap`, `trap -p`) sees the hook's; under `set -x` the hook's own steps around the
# original are traced.
#
# The EXIT trap left is OURS alone or "OURS; ORIG": OURS the hook's trap (rendered in), ORIG what
# the original set. OURS is `{ builtin . SLOW "$?" && builtin :; } &>/dev/null`: the
# exit-path file returns the command's status, so ORIG sees the command's $? without `(exit N)`,
# which forks and, failing under set -e, would end the trap before ORIG ran; the file is sourced on
# the left of `&&`,
# where errexit cannot fire, and a group that fails that way does not stop the shell either (bash
# manual, `set -e`), so ORIG still runs; `builtin :` runs inside the group, hidden from xtrace. ORIG
# runs after the record is written, with the umask 007 the record file needs (and LC_ALL=C when the
# record took the slow path). An ORIG that starts with the trap it found (the "append to the EXIT
# trap" idiom) has that part dropped, so the record is written once. Ignoring EXIT ('') or
# resetting it ('-', or naming it alone) leaves OURS alone.
#
# The general part reads "$@" as bash 5.2's trap builtin does (builtins/trap.def): options (-l, -p,
# --help, a bad one) only print; after an optional `--`, a first argument of digits naming a signal
# (below NSIG, 65 on Linux), or a lone argument, resets the signals named; otherwise the first
# argument is the action ('' ignores, '-' resets) for the others. EXIT is `exit` in any case or a
# number equal to 0 (strtoimax: leading white space and a sign, trailing blanks). The function
# sources this file with the caller's options (errexit, nounset): every test is in a condition and
# every expansion has a default.
