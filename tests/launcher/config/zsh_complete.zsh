# zsh -f zsh_complete.zsh DIR SCRIPT LINE
# Types LINE and TAB into an interactive zsh (in a pseudo-terminal) that has
# run compinit and sourced the completion SCRIPT, in directory DIR, and
# prints every word the completion offered, one per line (what compadd
# would add, read with compadd -O). Exits 1 if the completion did not end
# within 30 s.
zmodload zsh/zpty zsh/zselect
dir=$1 script=$2 line=$3
log=$dir/zsh-offers.log
: >$log
zpty completer 'zsh -f -i'
zpty -w completer "cd ${(q)dir} && autoload -Uz compinit && compinit -u -D -d ${(q)dir}/zcompdump"
zpty -w completer "source ${(q)script}"
# compadd, shadowed: log the words it would add, then add them.
zpty -w completer "compadd() { local -a offered; builtin compadd -O offered \"\$@\";\
 (( \$#offered )) && print -rl -- \$offered >>${(q)log}; builtin compadd \"\$@\"; }"
# TAB: complete, then say the completion is over.
zpty -w completer "_complete_and_log() { _main_complete; print -r -- '<done>' >>${(q)log}; };\
 zle -C complete-and-log complete-word _complete_and_log; bindkey '^I' complete-and-log"
zpty -w -n completer "$line"$'\t'
for attempt in {1..3000}; do
  zpty -r -t completer drained 2>/dev/null
  grep -qx '<done>' $log && break
  zselect -t 1  # 10 ms, then look again
done
zpty -d completer
grep -qx '<done>' $log || { print -u2 "zsh_complete: no completion within 30 s"; exit 1; }
grep -vx '<done>' $log | sort -u
