#include "ddprun/launcher/core/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace ddprun::launcher {

spdlog::logger& log() {
  static const auto logger = spdlog::stderr_color_mt("ddprun");
  return *logger;
}

}  // namespace ddprun::launcher
