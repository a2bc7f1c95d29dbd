# repeat-failure neutral route (BASH_ENV hook) for agent @AGENT@, read at every bash start.
# The record is written by @SLOW@ (its notes: the contract). The render keeps only the code line
# (bash parses comments too), and a chained hook is bash_env.chain.bash around its test and
# commands, so this file stays one `{ if TEST; then COMMANDS; fi; } 2>/dev/null || :` line.
# shellcheck disable=SC1091 # @SLOW@ is rendered later
{ if [[ -n ${BASH_EXECUTION_STRING-} && $$ != 1 && $PPID != 0 && ( ${REPEAT_FAILURE_MARK:-$$} == "$$" || ( ! -d /proc/$REPEAT_FAILURE_MARK && -d /proc/$$ ) ) ]]; then builtin export REPEAT_FAILURE_MARK=$$; builtin trap '{ builtin command . @SLOW@ "$?" && builtin :; } &>/dev/null' EXIT; fi; } 2>/dev/null || :
