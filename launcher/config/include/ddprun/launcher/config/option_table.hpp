// The one table of ddprun's options: torchrun's, in torchrun's order and
// help groups, then ddprun's own. The parser (cli.cpp), the abbreviation
// pre-pass (abbreviations.cpp), --help (help_text.cpp) and the shell
// completion scripts (completion.cpp) all read it, so an option added here
// is parsed, abbreviated, documented and completed alike.
// Constant data and pure functions; safe on any thread.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

// torchrun's run.py builds its parser in sections, each under a comment;
// --help shows them as groups, with ddprun's own options last.
enum class OptionGroup { kSize, kRendezvous, kLaunch, kCompatible, kDdprun };

// What a shell may complete as the option's value.
enum class ValueHint {
  kText,       // anything: nothing to offer
  kChoices,    // OptionSpec::choices
  kDirectory,  // a directory name
};

struct OptionSpec {
  const char* names;  // CLI11 name list; the first long name is the canonical one
  const char* dest;   // argparse dest, which also names PET_<DEST_UPPER>
  bool is_flag;
  bool env_backed;
  const char* value_name;
  const char* help;
  OptionGroup group;
  ValueHint hint = ValueHint::kText;
  const char* choices = "";  // space-separated, for ValueHint::kChoices
  // Taken only when spelled in full, never as an abbreviation: an option of
  // ddprun's own that would otherwise make a torchrun abbreviation ambiguous.
  bool whole_name_only = false;
};

// Every option, in the order --help lists them.
std::span<const OptionSpec> optionTable();

// The title --help gives a group.
const char* groupTitle(OptionGroup group);

// The first long name ("-m,--module" gives "--module"): how errors name the flag.
std::string canonicalFlag(const OptionSpec& spec);

// PET_<DEST> in upper case: the variable an env-backed option falls back to.
std::string petName(const OptionSpec& spec);

// Every name of the option as typed on a command line ("-m", "--module").
std::vector<std::string> spellings(const OptionSpec& spec);
// Whether `name` is one of them, without building the list: the parse asks
// this for every argument and option.
bool isSpelling(const OptionSpec& spec, std::string_view name);
// Whether one of them is a short name ("-m").
bool hasShortName(const OptionSpec& spec);

// Whether an empty value ("--x=", PET_X="") is a value: only where torchrun
// gives "" a meaning (its default, or "not given"); elsewhere torchrun fails
// on it or, for --rdzv-id, makes up a run id per node.
bool takesEmptyValue(const OptionSpec& spec);

// The option's fixed values (ValueHint::kChoices), split.
std::vector<std::string> choiceList(const OptionSpec& spec);

}  // namespace ddprun::launcher
