// `ddprun devices`: the CUDA GPUs this node's workers would see, counted as
// `--nproc-per-node gpu` counts them (NVML, then the CUDA driver, under this
// shell's CUDA_VISIBLE_DEVICES), with what counted them, or why none is
// visible. `--json` is also how the agent counts: it runs this in a
// short-lived child so that neither library is ever loaded into the agent.
// Runs on main's thread.
//
// Exit status: 0 when it could ask (whether or not a GPU is visible); 2 for
// bad flags.
#pragma once

#include <string>
#include <vector>

namespace ddprun::launcher {

// `args`: what follows "devices" on the command line.
int runDevicesCommand(const std::vector<std::string>& args);

}  // namespace ddprun::launcher
