// Written by hand: CLI11 2.1 (Debian 12's) matches option names exactly and
// takes "--flag=value" as a value for the flag, where torchrun's argparse
// accepts any unambiguous prefix of a long option and refuses a value given
// to a flag. This pass brings argv to what CLI11 reads the same way.
#include "abbreviations.hpp"

#include <string_view>

#include "ddprun/launcher/option_values.hpp"
#include "ddprun/proto/errors.hpp"
#include "option_table.hpp"

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
    for (const std::string& spelling : spellings(*spec)) {
      if (spelling == name) {
        return spec;
      }
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

// A long option ("--name" or "--name=value") at args[i], rewritten to its
// canonical name when abbreviated. Returns how many arguments it used, 0
// when it is not one of ddprun's (CLI11 then names it).
std::size_t longOption(std::vector<std::string>& args, std::size_t i) {
  std::string& arg = args[i];
  const auto equals = arg.find('=');
  const std::string name = arg.substr(0, equals);
  const std::string value = equals == std::string::npos ? "" : arg.substr(equals + 1);
  const OptionSpec* spec = exactly(name);
  if (spec == nullptr) {
    spec = byPrefix(name);
    if (spec == nullptr) {
      return 0;
    }
    arg = canonicalFlag(*spec) + (equals == std::string::npos ? "" : "=" + value);
  }
  if (equals != std::string::npos) {
    if (spec->is_flag) {
      failValue(canonicalFlag(*spec), value, "a flag takes no value");
    }
    return 1;
  }
  return spec->is_flag ? 1 : 2;  // the value, whatever it looks like, as CLI11 takes it
}

// A short option: "-m", "-h", "-r VALUE", "-r3" (CLI11 reads these as
// argparse does); "-m=1" is a value given to a flag. 0 when unknown.
std::size_t shortOption(const std::vector<std::string>& args, std::size_t i) {
  const std::string& arg = args[i];
  const OptionSpec* spec = exactly(arg.substr(0, 2));
  if (spec == nullptr) {
    return 0;
  }
  if (spec->is_flag && arg.size() > 2 && arg[2] == '=') {
    failValue(canonicalFlag(*spec), arg.substr(3), "a flag takes no value");
  }
  return !spec->is_flag && arg.size() == 2 ? 2 : 1;
}

}  // namespace

std::vector<std::string> expandAbbreviations(std::vector<std::string> args) {
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
