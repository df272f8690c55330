#include "ddprun/launcher/host/health_check.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>

#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/launcher/host/device_count.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/proto/visible_text.hpp"

namespace ddprun::launcher {
namespace {

std::optional<std::string> runDirUnwritable(const std::filesystem::path& run_dir) {
  if (run_dir.empty()) {
    return std::nullopt;
  }
  std::string probe = (run_dir / ".health_XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    return "the run directory " + proto::visible(run_dir.string()) +
           " takes no new file: " + std::strerror(errno);
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return std::nullopt;
}

std::optional<std::string> gpusLost(int at_start) {
  const GpuCount now = countVisibleGpusNow();
  if (now.count >= at_start) {
    return std::nullopt;
  }
  std::string why = std::to_string(at_start) + " GPU(s) were visible when ddprun started, " +
                    std::to_string(now.count) + " now";
  if (!now.why_none.empty()) {
    why += " (" + now.why_none + ")";
  }
  return why;
}

std::optional<std::string> commandFails(const HealthCheck& check) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", check.command};
  options.env = inheritedEnvironment();
  const std::string shown = "--health-check '" + proto::visible(check.command) + "'";
  try {
    Subprocess child(options);
    const std::optional<ExitStatus> status = child.waitFor(check.timeout);
    if (!status) {
      child.signalGroup(SIGKILL);
      child.wait();
      return shown + " gave no answer within " + formatSeconds(check.timeout);
    }
    if (!status->success()) {
      return shown + " " + status->describe();
    }
  } catch (const SpawnError& error) {
    return shown + " could not be run: " + error.what();
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> checkNodeHealth(const HealthCheck& check, int join) {
  if (auto why = runDirUnwritable(check.run_dir)) {
    return why;
  }
  if (join > 0 && check.gpus_at_start > 0) {
    if (auto why = gpusLost(check.gpus_at_start)) {
      return why;
    }
  }
  if (!check.command.empty()) {
    return commandFails(check);
  }
  return std::nullopt;
}

}  // namespace ddprun::launcher
