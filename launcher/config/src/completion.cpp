// The scripts printed by --print-completion, generated from the option table
// so that every option, in both spellings, completes, with its fixed values
// where it has some. torchrun prints shtab's scripts; these are written
// here because shtab is a Python package and CLI11 has no such generator.
#include <sstream>
#include <string>

#include "ddprun/launcher/config/cli.hpp"
#include "ddprun/launcher/config/option_table.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

std::string joined(const std::vector<std::string>& words, const std::string& separator) {
  std::string text;
  for (const std::string& word : words) {
    text += (text.empty() ? "" : separator) + word;
  }
  return text;
}

// Every spelling of every option that takes a value, or of every flag.
std::vector<std::string> spellingsWhere(bool flags) {
  std::vector<std::string> names;
  if (flags) {
    names = {"-h", "--help"};
  }
  for (const OptionSpec& spec : optionTable()) {
    if (spec.is_flag == flags) {
      for (std::string& name : spellings(spec)) {
        names.push_back(std::move(name));
      }
    }
  }
  return names;
}

// The bash `case` arms completing each option's value.
std::string bashValueCases() {
  std::ostringstream out;
  for (const OptionSpec& spec : optionTable()) {
    if (spec.is_flag) {
      continue;
    }
    out << "    " << joined(spellings(spec), "|") << ")\n      ";
    switch (spec.hint) {
      case ValueHint::kChoices:
        out << "COMPREPLY=($(compgen -W \"" << spec.choices << "\" -- \"$cur\"))";
        break;
      case ValueHint::kDirectory:
        out << "COMPREPLY=($(compgen -d -- \"$cur\"))";
        break;
      case ValueHint::kText:
        out << "COMPREPLY=()";
        break;
    }
    out << "\n      return 0 ;;\n";
  }
  return out.str();
}

// bash: words before the cursor are scanned for the training script (past
// it, the script's own arguments: files); an option's value, also written
// `--opt=value` (which bash splits at '='), completes from the option.
std::string bashScript() {
  std::ostringstream out;
  out << R"(# bash completion for ddprun (ddprun --print-completion bash).
# Load it with: source <(ddprun --print-completion bash)
_ddprun_value_options=")"
      << joined(spellingsWhere(false), " ") << R"("
_ddprun_flags=")"
      << joined(spellingsWhere(true), " ") << R"("

# True when the option in $1 (whole, or an abbreviation as ddprun accepts)
# takes a value in the next word.
_ddprun_takes_value() {
  local option found=1
  for option in $_ddprun_value_options; do
    [[ $option == "$1" ]] && return 0
    [[ $option == "$1"* && $1 == --?* ]] && found=0
  done
  for option in $_ddprun_flags; do
    [[ $option == "$1"* ]] && return 1
  done
  return $found
}

_ddprun() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev="" i=1 word
  (( COMP_CWORD > 0 )) && prev=${COMP_WORDS[COMP_CWORD-1]}
  while (( i < COMP_CWORD )); do
    word=${COMP_WORDS[i]}
    if [[ $word == -- || $word != -* ]]; then
      COMPREPLY=($(compgen -f -- "$cur"))
      return 0
    fi
    if _ddprun_takes_value "$word"; then
      [[ ${COMP_WORDS[i+1]} == = ]] && (( i++ ))
      (( i++ ))
    fi
    (( i++ ))
  done
  if [[ $cur == = ]]; then
    cur=""
  elif [[ $prev == = ]] && (( COMP_CWORD > 1 )); then
    prev=${COMP_WORDS[COMP_CWORD-2]}
  fi
  case $prev in
)" << bashValueCases()
      << R"(  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$_ddprun_flags $_ddprun_value_options" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o filenames -o bashdefault -F _ddprun ddprun
)";
  return out.str();
}

// Text inside a single-quoted _arguments spec: a quote closes and reopens;
// ']' ends a description and ':' a message, so both are escaped.
std::string zshQuoted(const std::string& text) {
  std::string quoted;
  for (const char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else if (c == ']' || c == ':' || c == '[' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else {
      quoted += c;
    }
  }
  return quoted;
}

std::string zshValueAction(const OptionSpec& spec) {
  switch (spec.hint) {
    case ValueHint::kChoices:
      return "(" + std::string(spec.choices) + ")";
    case ValueHint::kDirectory:
      return "_directories";
    case ValueHint::kText:
      break;
  }
  return " ";  // a value is needed, but nothing can be offered
}

// One _arguments spec per spelling; the spellings of one option exclude
// each other.
std::string zshSpecs() {
  std::ostringstream out;
  for (const OptionSpec& spec : optionTable()) {
    const auto names = spellings(spec);
    const std::string exclusions = "(" + joined(names, " ") + ")";
    for (const std::string& name : names) {
      out << "    '" << exclusions << name;
      if (!spec.is_flag) {
        out << (name.starts_with("--") ? "=" : "+");
      }
      out << "[" << zshQuoted(spec.help) << "]";
      if (!spec.is_flag) {
        out << ":" << zshQuoted(spec.value_name) << ":" << zshValueAction(spec);
      }
      out << "' \\\n";
    }
  }
  return out.str();
}

// zsh: _arguments; the first word that is not an option is the script, and
// every word after it is the script's (files).
std::string zshScript() {
  std::ostringstream out;
  out << R"(#compdef ddprun
# zsh completion for ddprun (ddprun --print-completion zsh). Save it as _ddprun
# in a directory on $fpath, or load it after compinit with:
#   source <(ddprun --print-completion zsh)
_ddprun() {
  _arguments -s -S \
    '(- *)'{-h,--help}'[show this help message and exit]' \
)" << zshSpecs()
      << R"(    '1:training script:_files' \
    '*::script argument:_files'
}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
  _ddprun "$@"
else
  compdef _ddprun ddprun
fi
)";
  return out.str();
}

// What tcsh offers for an option's value: its fixed values, directories, or
// nothing (tcsh's list types; `n` is none).
std::string tcshValues(const OptionSpec& spec) {
  switch (spec.hint) {
    case ValueHint::kChoices:
      return "(" + joined(choiceList(spec), " ") + ")";
    case ValueHint::kDirectory:
      return "d";
    case ValueHint::kText:
      break;
  }
  return "n";
}

// tcsh: one `complete` line. The first pattern that matches wins: the word
// after an option that takes a value (n/), `--option=value` (c/), then long
// and short option names, then files. Unlike bash's and zsh's, it does not
// stop at the training script: tcsh's patterns cannot tell it apart. No
// comment line: `eval "`ddprun --print-completion tcsh`"` reads the output as
// one line, which a leading comment would swallow whole.
std::string tcshScript() {
  std::ostringstream out;
  out << "complete ddprun";
  std::vector<std::string> long_names;
  std::vector<std::string> short_names = {"h"};
  for (const OptionSpec& spec : optionTable()) {
    for (const std::string& name : spellings(spec)) {
      const bool is_long = name.starts_with("--");
      (is_long ? long_names : short_names).push_back(name.substr(is_long ? 2 : 1));
      if (!spec.is_flag) {
        out << " 'n/" << name << "/" << tcshValues(spec) << "/'";
        if (is_long) {
          out << " 'c/" << name << "=/" << tcshValues(spec) << "/'";
        }
      }
    }
  }
  long_names.emplace_back("help");
  out << " 'c/--/(" << joined(long_names, " ") << ")/' 'c/-/(" << joined(short_names, " ")
      << ")/' 'p/*/f/'\n";
  return out.str();
}

}  // namespace

std::string completionScript(std::string_view shell) {
  if (shell == "bash") {
    return bashScript();
  }
  if (shell == "tcsh") {
    return tcshScript();
  }
  if (shell == "zsh") {
    return zshScript();
  }
  throw ConfigError("--print-completion '" + std::string(shell) + "': expected bash, tcsh or zsh");
}

}  // namespace ddprun::launcher
