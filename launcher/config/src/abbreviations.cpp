// Written by hand: CLI11 2.1 (Debian 12's) matches option names exactly and
// takes "--flag=value" as a value for the flag, where torchrun's argparse
// accepts any unambiguous prefix of a long option and refuses a value given
// to a flag. CLI11 2.1 also reads "--opt=" as "--opt" alone and takes the
// next argument as its value (split_long leaves the value empty, and
// _parse_arg then gathers one more), and "-r=3" as "=3", where argparse
// reads "" and "3". This pass brings argv to what CLI11 reads the same way:
// an attached value is handed over as an argument of its own, which CLI11
// takes whatever it is, "" included.
#include "abbreviations.hpp"

#include <string_view>

#include "ddprun/launcher/config/option_table.hpp"
#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/proto/cli_args.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

// CLI11 adds -h/--help itself; argparse abbreviates it like any option.
constexpr OptionSpec kHelp = {"-h,--help", "help", true, false, "", "", OptionGroup::kSize};

std::vector<const OptionSpec*> everyOption() {
  std::vector<const OptionSpec*> options = {&kHelp};
  for (const OptionSpec& spec : optionTable()) {
    options.push_back(&spec);
  }
  return options;
}

const OptionSpec* exactly(std::string_view name) {
  for (const OptionSpec* spec : everyOption()) {
    if (isSpelling(*spec, name)) {
      return spec;
    }
  }
  return nullptr;
}

// The option `name` abbreviates, nullptr when none. Both spellings of one
// option are one option ("--nproc" is --nproc-per-node): argparse counts
// spellings and calls that ambiguous, which no user means. An option taken
// only whole is no candidate.
const OptionSpec* byPrefix(std::string_view name) {
  std::vector<const OptionSpec*> matches;
  std::string candidates;
  for (const OptionSpec* spec : everyOption()) {
    if (spec->whole_name_only) {
      continue;
    }
    for (const std::string& spelling : spellings(*spec)) {
      if (spelling.starts_with("--") && spelling.starts_with(name)) {
        matches.push_back(spec);
        candidates += (candidates.empty() ? "" : ", ") + spelling;
        break;  // one name per option in the list of candidates
      }
    }
  }
  if (matches.size() > 1) {
    throw ConfigError("ambiguous option: " + std::string(name) + " could match " + candidates);
  }
  return matches.empty() ? nullptr : matches.front();
}

// "--name=value" or "-n=value" of a value option: "--name" and "value", two
// arguments. Returns how many arguments the option now spans.
std::size_t detachValue(std::vector<std::string>& args, std::size_t i, const OptionSpec& spec,
                        const std::string& name, const std::string& value) {
  if (spec.is_flag) {
    failValue(canonicalFlag(spec), value, "a flag takes no value");
  }
  args[i] = name;
  args.insert(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, value);
  return 2;
}

// A long option ("--name" or "--name=value") at args[i], rewritten to its
// canonical name when abbreviated. Returns how many arguments it used, 0
// when it is not one of ddprun's (CLI11 then names it).
std::size_t longOption(std::vector<std::string>& args, std::size_t i) {
  const auto attached = proto::splitAttachedValue(args[i]);
  std::string name = attached ? attached->name : args[i];
  const OptionSpec* spec = exactly(name);
  if (spec == nullptr) {
    spec = byPrefix(name);
    if (spec == nullptr) {
      return 0;
    }
    name = canonicalFlag(*spec);
  }
  if (attached) {
    return detachValue(args, i, *spec, name, attached->value);
  }
  args[i] = name;
  return spec->is_flag ? 1 : 2;  // the value, whatever it looks like, as CLI11 takes it
}

// A short option: "-m", "-h", "-r VALUE", "-r3" (CLI11 reads these as
// argparse does), "-r=3" and "-r=" (argparse: "3" and ""). Flags run
// together, as both read them: "-mt3" is -m -t 3, and "-mt 3" takes the
// next argument for -t. 0 when unknown.
std::size_t shortOption(std::vector<std::string>& args, std::size_t i) {
  const std::string arg = args[i];
  const std::string name = arg.substr(0, 2);
  const OptionSpec* spec = exactly(name);
  if (spec == nullptr) {
    return 0;
  }
  if (const auto attached = proto::splitAttachedValue(arg)) {
    return detachValue(args, i, *spec, name, attached->value);
  }
  for (std::size_t at = 2; spec->is_flag && at < arg.size(); ++at) {
    spec = exactly(std::string("-") + arg[at]);
    if (spec == nullptr) {
      return 1;  // CLI11 names it
    }
    if (!spec->is_flag) {
      return at + 1 == arg.size() ? 2 : 1;  // its value is the next argument, or the rest
    }
  }
  return !spec->is_flag && arg.size() == 2 ? 2 : 1;
}

}  // namespace

std::vector<std::string> argparseToCli11(std::vector<std::string> args) {
  std::size_t i = 0;
  while (i < args.size()) {
    const std::string& arg = args[i];
    // The script (the first positional) or "--" ends ddprun's options.
    if (arg == "--" || arg.size() < 2 || arg[0] != '-') {
      break;
    }
    const std::size_t used = arg[1] == '-' ? longOption(args, i) : shortOption(args, i);
    if (used == 0) {
      break;
    }
    i += used;
  }
  return args;
}

}  // namespace ddprun::launcher
