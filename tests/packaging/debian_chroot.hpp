// DebianChroot: a fresh minimal Debian 12 (debootstrap --variant=minbase) in a
// directory the caller owns, and commands run inside it as root.
//
// Each command runs in a mount namespace of its own (unshare), where /proc,
// the host's /dev and the apt cache are bind-mounted before the chroot: the
// kernel drops those mounts when the command ends, however it ends (a
// timeout's SIGKILL included), and the caller's namespace never sees them,
// so removing the directory afterwards never reaches into the host's /proc.
// debootstrap runs in one too, for the mounts it makes itself.
//
// Downloads are kept in the host's apt cache (/var/cache/apt/archives),
// which debootstrap (--cache-dir) and the chroot's apt share: they are the
// archive's own files, checked by both against the archive's signed lists,
// so a later run downloads only the lists. A machine with an empty cache
// downloads everything.
//
// Owns no resource beyond the commands it runs, each to its end; used by one
// thread.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "ddprun/test_support/command.hpp"

namespace ddprun::packaging_tests {

class DebianChroot {
 public:
  // Bootstraps Debian 12 (bookworm) into `root`, an empty directory, from
  // `mirror`; throws std::runtime_error with debootstrap's output when it
  // fails.
  DebianChroot(std::filesystem::path root, std::string mirror);

  // Runs argv inside the chroot, as root, with a plain environment (PATH,
  // HOME, LANG, TMPDIR, DEBIAN_FRONTEND=noninteractive), stdout and stderr
  // merged.
  test_support::CommandResult run(const std::vector<std::string>& argv,
                                  std::chrono::seconds timeout) const;

  // `inside` (an absolute path in the chroot) as seen from outside.
  std::filesystem::path path(const std::string& inside) const;

  // The mirror given to debootstrap: $DDPRUN_DEBIAN_MIRROR, else
  // http://deb.debian.org/debian.
  static std::string defaultMirror();

 private:
  std::filesystem::path root_;
};

}  // namespace ddprun::packaging_tests
