#include "worker_pty.hpp"

#include <fcntl.h>
#include <pty.h>
#include <termios.h>
#include <unistd.h>

namespace ddprun::launcher {

// glibc's openpty opens the slave without making it a controlling terminal;
// close-on-exec is set at once, before any other worker is spawned from this
// thread (the spawn itself closes every descriptor too).
std::optional<PtyPair> openWorkerPty(const winsize& size) {
  PtyPair pair;
  winsize initial = size;
  if (::openpty(&pair.master, &pair.slave, nullptr, nullptr, &initial) != 0) {
    return std::nullopt;
  }
  ::fcntl(pair.master, F_SETFD, FD_CLOEXEC);
  ::fcntl(pair.slave, F_SETFD, FD_CLOEXEC);
  termios settings{};
  if (::tcgetattr(pair.slave, &settings) == 0) {
    settings.c_oflag &= ~static_cast<tcflag_t>(OPOST);  // the relay wants the bytes as written
    ::tcsetattr(pair.slave, TCSANOW, &settings);
  }
  return pair;
}

void resizePty(int master, const winsize& size) { ::ioctl(master, TIOCSWINSZ, &size); }

}  // namespace ddprun::launcher
