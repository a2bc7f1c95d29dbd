# Chained (C-AC16): the agent's original BASH_ENV, sourced in every shell after the hook's EXIT
# trap is set, so an error in it (say, an unset variable under set -u) never stops the record.
# If it sets an EXIT trap of its own, the hook's trap runs first and then the original's, which
# sees the command's $? as before. __rf_o is a scratch variable, unset before the command runs.
if [[ -r @CHAIN@ ]]; then builtin . @CHAIN@; fi
{ if [[ ${REPEAT_FAILURE_MARK-} == "$$" ]]; then __rf_o=$(builtin trap -p EXIT); if [[ $__rf_o != @OURS_P@ ]]; then __rf_o=${__rf_o#"trap -- '"}; __rf_o=${__rf_o%"' EXIT"}; __rf_o=${__rf_o//"'\\''"/"'"}; builtin trap -- @OURS_Q@'; (exit $__rf_x); '"$__rf_o" EXIT; fi; builtin unset __rf_o; fi; } 2>/dev/null || :
