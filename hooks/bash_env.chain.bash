# Chained (C-AC16): the original BASH_ENV, with `trap` a function meanwhile (@TRAPF@).
# shellcheck disable=SC2015,SC2064 # `__rf_w=1` cannot fail; the arguments are the caller's
builtin declare -F trap >/dev/null && __rf_w=1 || { __rf_w=2; trap() { if [[ -r @TRAPF@ ]]; then builtin . @TRAPF@ "$@"; else builtin trap "$@"; fi; }; }
if [[ -r @CHAIN@ ]]; then builtin . @CHAIN@; fi
{ if [[ ${__rf_w-} == 2 && ! -o posix ]]; then builtin unset -f trap; builtin unset __rf_w; elif [[ -n ${__rf_w-} ]]; then __rf_m=1; builtin . @TRAPF@; fi; } 2>/dev/null || :
