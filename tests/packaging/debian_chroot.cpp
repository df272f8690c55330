#include "debian_chroot.hpp"

#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace ddprun::packaging_tests {
namespace {

using test_support::CommandOptions;
using test_support::CommandResult;
using test_support::Streams;

constexpr const char* kSuite = "bookworm";  // Debian 12
constexpr const char* kAptCache = "/var/cache/apt/archives";

// The host's tools (unshare, debootstrap, chroot) are found on this PATH, and
// a command in the chroot sees these variables only, never the test's.
test_support::Environment plainEnvironment() {
  return {{"PATH", "/usr/sbin:/usr/bin:/sbin:/bin"},
          {"HOME", "/root"},
          {"LANG", "C.UTF-8"},
          {"TMPDIR", "/tmp"},
          {"DEBIAN_FRONTEND", "noninteractive"}};
}

// argv in a mount namespace of its own: the mounts it makes end with it.
std::vector<std::string> inMountNamespace(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"unshare", "--mount", "--propagation", "private", "--"});
  return argv;
}

// Mounts what a command in the chroot needs, then becomes the command: $1 is
// the root, $2 the apt cache, the rest the command. /dev whole: apt wants a
// pseudo-terminal for its log, LibTorch /dev/shm.
constexpr const char* kEnterChroot = R"(set -e
root=$1
cache=$2
shift 2
mount --rbind /proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --bind "$cache" "$root$cache"
exec chroot "$root" "$@")";

}  // namespace

DebianChroot::DebianChroot(std::filesystem::path root, std::string mirror)
    : root_(std::move(root)) {
  const CommandOptions options{plainEnvironment(), std::chrono::minutes(10), Streams::Merged};
  const CommandResult result = test_support::runCommand(
      inMountNamespace({"debootstrap", "--variant=minbase", std::string("--cache-dir=") + kAptCache,
                        kSuite, root_.string(), mirror}),
      options);
  if (result.code != 0) {
    throw std::runtime_error("debootstrap of Debian 12 from " + mirror + " " +
                             result.status.describe() + ":\n" + result.output);
  }
}

test_support::CommandResult DebianChroot::run(const std::vector<std::string>& argv,
                                              std::chrono::seconds timeout) const {
  std::vector<std::string> command = {"sh", "-c", kEnterChroot, "sh", root_.string(), kAptCache};
  command.insert(command.end(), argv.begin(), argv.end());
  return test_support::runCommand(inMountNamespace(std::move(command)),
                                  {plainEnvironment(), timeout, Streams::Merged});
}

std::filesystem::path DebianChroot::path(const std::string& inside) const {
  return root_ / std::filesystem::path(inside).relative_path();
}

std::string DebianChroot::defaultMirror() {
  const char* mirror = std::getenv("DDPRUN_DEBIAN_MIRROR");
  return mirror != nullptr && *mirror != '\0' ? mirror : "http://deb.debian.org/debian";
}

}  // namespace ddprun::packaging_tests
