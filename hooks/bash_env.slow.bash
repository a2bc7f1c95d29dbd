# repeat-failure neutral route, slow path; sourced only from the EXIT trap of the hook
# (hook/<agent>.sh) when the command has control characters or its record would not fit in one
# 4096-byte line. Inputs: __rf_h (the record up to and including "exit"), BASH_EXECUTION_STRING.
# Output: __rf_l, the whole record line without its newline. Runs with LC_ALL=C, so lengths and
# cuts count bytes; the raw command is cut before escaping, never the escaped text.
__rf_r=$BASH_EXECUTION_STRING
__rf_k=
__rf_b=$((4085 - ${#__rf_h}))
if [ ${#__rf_r} -gt $__rf_b ]; then
  __rf_k=',"cut":true'
  __rf_b=$((__rf_b - 11))
  __rf_r=${__rf_r:0:__rf_b}
fi
while :; do
  __rf_c=${__rf_r//\\/\\\\}
  __rf_c=${__rf_c//\"/\\\"}
  __rf_c=${__rf_c//$'\n'/\\n}
  __rf_c=${__rf_c//$'\t'/\\t}
  __rf_c=${__rf_c//$'\r'/\\r}
  case $__rf_c in
    *[$'\001'-$'\037']*)
      for __rf_i in 1 2 3 4 5 6 7 8 11 12 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31; do
        printf -v __rf_o %02x "$__rf_i"
        printf -v __rf_y "\\x$__rf_o"
        __rf_c=${__rf_c//"$__rf_y"/\\u00$__rf_o}
      done
      ;;
  esac
  [ ${#__rf_c} -le $__rf_b ] && break
  if [ -z "$__rf_k" ]; then
    __rf_k=',"cut":true'
    __rf_b=$((__rf_b - 11))
  fi
  # Shrink in proportion to how much escaping grew the text; always by at least one byte.
  __rf_i=$((${#__rf_r} * __rf_b / ${#__rf_c}))
  [ $__rf_i -lt ${#__rf_r} ] || __rf_i=$((${#__rf_r} - 1))
  __rf_r=${__rf_r:0:__rf_i}
done
__rf_l="$__rf_h$__rf_k,\"cmd\":\"$__rf_c\"}"
