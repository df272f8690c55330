// The paths a launch will make, checked before anything is forked or bound
// (and by --dry-run): the log directory (--log-dir, made if missing, or a
// fresh ddprun_XXXXXX under $TMPDIR), the run's directory in it, named
// <run id>_XXXXXX, and torch's file-timer pipe. One that cannot be made is a
// configuration error found at start, one line and exit 2, not a failure
// once the rendezvous is up. Reads the file system only; main thread.
#pragma once

#include "ddprun/launcher/core/launch_config.hpp"

namespace ddprun::launcher {

// Throws ConfigError naming the option (or variable), the path and why.
void checkStartPaths(const LaunchConfig& config);

}  // namespace ddprun::launcher
