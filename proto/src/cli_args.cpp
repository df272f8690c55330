// Written by hand: CLI11 2.1 has no setting for argparse's reading of
// "--name=" (split_long leaves the value empty, and _parse_arg then gathers
// one more argument). An option given its value as an argument of its own is
// read the same way by both, "" included, so the value is handed over so.
#include "ddprun/proto/cli_args.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstddef>

namespace ddprun::proto {
namespace {

// The option `arg` names when it is one of `app`'s that always takes a value
// (CLI11 then takes the next argument, whatever it looks like); nullptr for
// a flag, an unknown option or anything not an option.
const CLI::Option* valueOption(const CLI::App& app, const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-' || arg == "--") {
    return nullptr;  // also keeps a positional from matching an option's positional name
  }
  const CLI::Option* option = app.get_option_no_throw(arg);
  if (option == nullptr) {
    return nullptr;
  }
  const int least = std::min(option->get_type_size_min(), option->get_items_expected_min());
  return least > 0 ? option : nullptr;
}

bool mayBeEmpty(const CLI::Option* option, const std::vector<const CLI::Option*>& may_be_empty) {
  return std::find(may_be_empty.begin(), may_be_empty.end(), option) != may_be_empty.end();
}

}  // namespace

std::optional<AttachedValue> splitAttachedValue(const std::string& arg) {
  if (arg.starts_with("--")) {
    const auto equals = arg.find('=');
    if (equals == std::string::npos) {
      return std::nullopt;
    }
    return AttachedValue{arg.substr(0, equals), arg.substr(equals + 1)};
  }
  if (arg.size() > 2 && arg[0] == '-' && arg[2] == '=') {
    return AttachedValue{arg.substr(0, 2), arg.substr(3)};
  }
  return std::nullopt;
}

std::vector<std::string> readAsArgparse(const CLI::App& app, std::vector<std::string> args,
                                        const std::vector<const CLI::Option*>& may_be_empty) {
  std::size_t i = 0;
  while (i < args.size() && args[i] != "--") {
    if (const auto attached = splitAttachedValue(args[i])) {
      if (valueOption(app, attached->name) != nullptr) {
        args[i] = attached->name;
        args.insert(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, attached->value);
      }
    }
    const CLI::Option* option = valueOption(app, args[i]);
    if (option == nullptr || i + 1 == args.size()) {
      ++i;  // a flag, a positional, or an option whose missing value CLI11 names
      continue;
    }
    if (args[i + 1].empty() && !mayBeEmpty(option, may_be_empty)) {
      throw CLI::ValidationError(args[i],
                                 "empty value (an unset variable?); give a value or leave it out");
    }
    i += 2;  // the option and its value
  }
  return args;
}

}  // namespace ddprun::proto
