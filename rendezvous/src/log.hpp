// The rendezvous component's spdlog logger ("rdzv", to stderr).
#pragma once

#include <spdlog/spdlog.h>

namespace ddprun::rdzv {

spdlog::logger& rdzvLog();

}  // namespace ddprun::rdzv
