// --help laid out as argparse lays out torchrun's: the usage, the
// description, the positional arguments, then the options by group (CLI11's
// ->group(), titled from option_table.hpp). A CLI11 formatter: CLI11 prints
// each group and option; only the order and the positional section are ours.
// Built and used on one thread.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace ddprun::launcher {

std::shared_ptr<CLI::Formatter> argparseStyleFormatter(std::string usage);

}  // namespace ddprun::launcher
