// argparse's reading of an attached value, for every CLI11 command line of
// ddprun, ddprund and train: "--name=value" and "-n=value" give the option
// "value", and "--name=" gives it "", never the next argument. CLI11 2.1
// (Debian 12's) reads "--name=" as "--name" alone and then takes the next
// argument as the value, and "-n=value" as "=value". Pure functions; safe on
// any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace ddprun::proto {

// An option and the value attached to it with '='.
struct AttachedValue {
  std::string name;   // "--name", "-n" ("--" for "--=value")
  std::string value;  // "" for "--name="
};

// "--name=value" as {"--name", "value"}, "-n=value" as {"-n", "value"};
// nullopt for anything else (no '=', "-nvalue", a positional).
std::optional<AttachedValue> splitAttachedValue(const std::string& arg);

// Returns `args` (argv without the program's name, in order) as CLI11
// reads them the way argparse does: before "--", each attached value of an
// option of `app` that takes one becomes an argument of its own ("--out="
// becomes "--out" ""). Flags keep theirs (CLI11 reads "--json=false"), and
// unknown options are left for CLI11 to name. An empty value, attached or
// not, is refused unless its option is in `may_be_empty`: it is most often
// an unset variable in a script. Throws CLI::ValidationError naming the
// option, so it is reported as CLI11's own errors are. Call it once every
// option of `app` is defined.
std::vector<std::string> readAsArgparse(const CLI::App& app, std::vector<std::string> args,
                                        const std::vector<const CLI::Option*>& may_be_empty = {});

}  // namespace ddprun::proto
