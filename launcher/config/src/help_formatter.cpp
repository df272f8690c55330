#include "help_formatter.hpp"

#include <sstream>

namespace ddprun::launcher {
namespace {

// The script and its arguments are not CLI11 positionals (prefix_command()
// hands them back untouched), so their section is written here.
constexpr const char* kScriptHelp =
    "the script every worker runs: a Python file, a module with -m, or a\n"
    "program with --no-python (run directly)";
constexpr const char* kScriptArgsHelp =
    "its arguments, passed on verbatim; ${local_rank} becomes each\n"
    "worker's local rank";

class ArgparseStyleFormatter : public CLI::Formatter {
  static constexpr std::size_t kIndent = 2;  // CLI11's, before every option
  static constexpr std::size_t kGap = 2;     // argparse's least, between name and help

 public:
  explicit ArgparseStyleFormatter(std::string usage) : usage_(std::move(usage)) {
    column_width(32);
  }

  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const override {
    std::ostringstream out;
    out << usage_ << "\n" << app->get_description() << "\n\npositional arguments:\n";
    CLI::detail::format_help(out, "training_script", kScriptHelp, get_column_width());
    CLI::detail::format_help(out, "training_script_args", kScriptArgsHelp, get_column_width());
    out << "\n" << make_groups(app, mode);
    return out.str();
  }

  // One blank line between groups, as argparse leaves: make_groups() already
  // puts one after each.
  std::string make_group(std::string group, bool positional,
                         std::vector<const CLI::Option*> options) const override {
    std::string text = group + ":\n";
    for (const CLI::Option* option : options) {
      text += make_option(option, positional);
    }
    return text;
  }

  // argparse leaves at least two spaces between an option and its help, and
  // help2man (the man page) needs them to tell the two apart; CLI11 starts
  // the help on the name's line when the name is just shorter than the
  // column, one space after it. Such a name gets a line of its own.
  std::string make_option(const CLI::Option* option, bool positional) const override {
    const std::string name = make_option_name(option, positional) + make_option_opts(option);
    const std::string help = make_option_desc(option);
    std::ostringstream out;
    if (help.empty() || kIndent + name.size() + kGap <= get_column_width()) {
      CLI::detail::format_help(out, name, help, get_column_width());
    } else {
      out << std::string(kIndent, ' ') << name << "\n";
      CLI::detail::format_help(out, "", help, get_column_width());
    }
    return out.str();
  }

  // "-m, --module" as argparse writes it, not CLI11's "-m,--module".
  std::string make_option_name(const CLI::Option* option, bool positional) const override {
    std::string names = CLI::Formatter::make_option_name(option, positional);
    for (auto at = names.find(','); at != std::string::npos; at = names.find(',', at + 2)) {
      names.insert(at + 1, " ");
    }
    return names;
  }

 private:
  std::string usage_;
};

}  // namespace

std::shared_ptr<CLI::Formatter> argparseStyleFormatter(std::string usage) {
  return std::make_shared<ArgparseStyleFormatter>(std::move(usage));
}

}  // namespace ddprun::launcher
