# The hook chained to an original BASH_ENV (C-AC16): bash_env.sh's test (@IF@) and commands
# (@THEN@), then the original, with `trap` a function meanwhile; the state in __rf_w, the early
# `return` and the rare clean-up after it: the notes in bash_env.trap.bash (@TRAPF@).
# shellcheck shell=bash disable=SC2015,SC2064 # `__rf_w=1` cannot fail; the arguments are the caller's
{ if @IF@; then @THEN@; builtin export -f trap && __rf_w=1 || trap() { if [[ $#${2-}:${1-} == 2EXIT:[!-0-9\{]* && $BASHPID == "$$" ]]; then builtin trap -- @OURS@"; $1" EXIT; elif [[ -r @TRAPF@ ]]; then builtin . @TRAPF@ "$@"; else builtin trap "$@"; fi; }; else __rf_w=0; fi; } 2>/dev/null || :
[[ ! -r @CHAIN@ || -n ${__rf_s-} ]] || { __rf_s=1; builtin . @CHAIN@; builtin unset -v __rf_s; }
[[ -n ${__rf_w-} || -o posix ]] || { builtin unset -f trap; builtin return; }
if [[ ${__rf_w-} == 0 ]]; then builtin unset -v __rf_w; else { __rf_m=1; builtin . @TRAPF@; } 2>/dev/null || builtin :; fi
