// The agent's one logger ("ddprun" on stderr), shared by main, the Agent and
// the rendezvous backends. spdlog's _mt logger: any thread may log.
#pragma once

#include <spdlog/spdlog.h>

namespace ddprun::launcher {

spdlog::logger& log();

}  // namespace ddprun::launcher
