#include "log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace ddprun::rdzv {

spdlog::logger& rdzvLog() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("rdzv");
    return existing ? existing : spdlog::stderr_color_mt("rdzv");
  }();
  return *logger;
}

}  // namespace ddprun::rdzv
