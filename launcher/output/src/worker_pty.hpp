// A pseudo-terminal for one worker stream, so that a worker on a terminal
// sees one (isatty(), its window size, line-buffered C stdio) while the
// agent still relays its lines. Stateless functions; the caller owns the
// descriptors they return.
#pragma once

#include <sys/ioctl.h>

#include <cstddef>
#include <optional>

namespace ddprun::launcher {

struct PtyPair {
  int master = -1;  // the agent reads the worker's output here
  int slave = -1;   // the worker's stdout or stderr
};

// Opens a pair, both ends close-on-exec and neither the agent's controlling
// terminal. The slave passes bytes as written (no output processing: '\n'
// stays '\n') and has `size`. nullopt, with errno set, when no pty can be
// had (no /dev/pts, the kernel's pty limit).
std::optional<PtyPair> openWorkerPty(const winsize& size);

// Resizes the terminal of `master`. A worker's terminal is not its
// controlling terminal, so the agent sends it SIGWINCH itself.
void resizePty(int master, const winsize& size);

}  // namespace ddprun::launcher
