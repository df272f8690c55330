// argparse's reading of ddprun's options that CLI11 does not do: an
// unambiguous prefix names its option (--nproc 2, --max_res=1, --stand), a
// flag given an explicit value (--standalone=1) is an error, and an attached
// value is the value, empty or not (--rdzv-id= is "", -r=3 is "3"). Applied
// to ddprun's own options only, never to the training script or its
// arguments. Pure function; safe on any thread.
#pragma once

#include <string>
#include <vector>

namespace ddprun::launcher {

// Returns `args` with every abbreviated long option before the training
// script replaced by the option's canonical name ("--stand" becomes
// "--standalone", "--nproc=2" becomes "--nproc-per-node" "2") and every
// attached value detached ("--rdzv-id=" becomes "--rdzv-id" ""). Stops at
// the script, at "--" and at anything it does not know, which CLI11 then
// reports. Throws ConfigError for a prefix of several options (naming them)
// and for a value given to a flag.
std::vector<std::string> argparseToCli11(std::vector<std::string> args);

}  // namespace ddprun::launcher
