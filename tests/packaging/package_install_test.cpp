// The Debian packages installed as an admin installs them: cpack makes
// ddprun_*.deb and ddprun-train_*.deb from this build, debootstrap makes a
// fresh minimal Debian 12, and `apt-get install ./ddprun_*.deb` there fetches
// every dependency from the Debian archive. First the launcher alone (a node
// without LibTorch), then train. Then, from the installed paths only:
// --help and --version, a two-worker standalone job of the installed train,
// `man -w`, the unit (systemd-analyze verify; installed, not enabled), the
// completion, and a purge that takes every file away.
//
// Needs root (debootstrap, chroot, mounts) and debootstrap: skipped, saying
// which, without either. Needs the Debian archive ($DDPRUN_DEBIAN_MIRROR,
// else deb.debian.org). How downloads are cached: debian_chroot.hpp. Prints
// each package's size and dependencies and each phase's time.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "ddprun/launcher/process/executable_path.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun/test_support/text.hpp"
#include "ddprun/version.hpp"
#include "debian_chroot.hpp"

namespace ddprun {
namespace {

namespace fs = std::filesystem;
using packaging_tests::DebianChroot;
using test_support::contains;
using Clock = std::chrono::steady_clock;

constexpr auto kAptTimeout = std::chrono::seconds(600);
constexpr auto kCommandTimeout = std::chrono::seconds(120);
constexpr const char* kPackagesInside = "/tmp/packages";

bool haveDebootstrap() {
  const char* path = std::getenv("PATH");
  return launcher::findExecutable("debootstrap", std::string("/usr/sbin:/usr/bin:/sbin:/bin:") +
                                                     (path != nullptr ? path : ""))
      .has_value();
}

// The .deb in `directory` whose name starts with `prefix`.
std::optional<fs::path> packageFile(const fs::path& directory, const std::string& prefix) {
  for (const auto& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(prefix) && name.ends_with(".deb")) {
      return entry.path();
    }
  }
  return std::nullopt;
}

// Runs of this test on one machine take turns, from the bootstrap to the end:
// they share the host's apt cache, whose lock apt gives up on at once rather
// than wait, and which debootstrap fills unlocked. Holds an flock on a file
// of its own, released when it goes.
class MachineTurn {
 public:
  MachineTurn() : fd_(::open(kLockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0) {
      throw std::system_error(errno, std::generic_category(), kLockFile);
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      std::printf("package test: waiting for another run of it on this machine (%s)\n", kLockFile);
      std::fflush(stdout);
      ::flock(fd_, LOCK_EX);  // the suite's timeout bounds the wait
    }
  }
  ~MachineTurn() { ::close(fd_); }
  MachineTurn(const MachineTurn&) = delete;
  MachineTurn& operator=(const MachineTurn&) = delete;

 private:
  static constexpr const char* kLockFile = "/run/lock/ddprun-package-install-test.lock";
  int fd_;
};

class PackageInstall : public ::testing::Test {
 protected:
  // The phase's line, and the clock restarted for the next.
  void phaseDone(const std::string& phase) {
    const auto now = Clock::now();
    std::printf("package test: %-40s %6.1f s\n", phase.c_str(),
                std::chrono::duration<double>(now - phase_start_).count());
    std::fflush(stdout);
    phase_start_ = now;
  }

  test_support::CommandResult host(const std::vector<std::string>& argv) {
    return test_support::runCommand(
        argv, {launcher::inheritedEnvironment(), kAptTimeout, test_support::Streams::Merged});
  }
  test_support::CommandResult inside(const std::vector<std::string>& argv,
                                     std::chrono::seconds timeout = kCommandTimeout) {
    return chroot_->run(argv, timeout);
  }
  // `sh -c script` in the chroot, expected to succeed; its output.
  std::string shell(const std::string& script) {
    const auto result = inside({"sh", "-c", script});
    EXPECT_EQ(result.code, 0) << script << ":\n" << result.output;
    return result.output;
  }
  // One field of the package's control file, without its line's end.
  std::string controlField(const fs::path& deb, const std::string& field) {
    const auto result = host({"dpkg-deb", "--field", deb.string(), field});
    EXPECT_EQ(result.code, 0) << result.output;
    return result.output.substr(0, result.output.find('\n'));
  }

  void makePackages() {
    const fs::path directory = scratch_ / "packages";
    const auto result = host(
        {DDPRUN_CPACK, "-G", "DEB", "--config", DDPRUN_CPACK_CONFIG, "-B", directory.string()});
    ASSERT_EQ(result.code, 0) << result.output;
    launcher_deb_ = packageFile(directory, "ddprun_").value_or("");
    train_deb_ = packageFile(directory, "ddprun-train_").value_or("");
    ASSERT_FALSE(launcher_deb_.empty()) << result.output;
    ASSERT_FALSE(train_deb_.empty()) << result.output;
    for (const fs::path& deb : {launcher_deb_, train_deb_}) {
      std::printf("package %s: %ju bytes, Installed-Size %s KiB\n  Depends: %s\n",
                  deb.filename().c_str(), static_cast<std::uintmax_t>(fs::file_size(deb)),
                  controlField(deb, "Installed-Size").c_str(),
                  controlField(deb, "Depends").c_str());
    }
    // The dependencies shlibdeps found: LibTorch for train only.
    EXPECT_FALSE(contains(controlField(launcher_deb_, "Depends"), "libtorch"));
    EXPECT_TRUE(contains(controlField(train_deb_, "Depends"), "libtorch"));
    EXPECT_TRUE(contains(controlField(launcher_deb_, "Depends"), "libc6"));
    // Loaded only for --numa-binding, so no DT_NEEDED of ddprun names it.
    EXPECT_TRUE(contains(controlField(launcher_deb_, "Depends"), "libhwloc15"));
    // Its etcd TLS module's, which shlibdeps reads like any binary's.
    EXPECT_TRUE(contains(controlField(launcher_deb_, "Depends"), "libssl3"));
    phaseDone("cpack -G DEB");
  }

  void bootstrap() {
    turn_.emplace();
    phaseDone("our turn on this machine");
    fs::create_directory(scratch_ / "root");
    chroot_.emplace(scratch_ / "root", DebianChroot::defaultMirror());
    phaseDone("debootstrap --variant=minbase bookworm");
    fs::create_directory(chroot_->path(kPackagesInside));
    for (const fs::path& deb : {launcher_deb_, train_deb_}) {
      fs::copy_file(deb, chroot_->path(kPackagesInside) / deb.filename());
    }
  }

  // apt-get with `args`, in the packages' directory, expected to succeed.
  void aptGet(const std::string& args, const std::string& phase) {
    const std::string script =
        std::string("cd ") + kPackagesInside + " && apt-get -y -q -o Acquire::Retries=3 " + args;
    const auto result = inside({"sh", "-c", script}, kAptTimeout);
    ASSERT_EQ(result.code, 0) << script << ":\n" << result.output;
    phaseDone(phase);
  }

  void expectLauncherRunsWithoutLibTorch() {
    EXPECT_EQ(shell("command -v ddprun; command -v ddprund"),
              "/usr/bin/ddprun\n/usr/bin/ddprund\n");
    EXPECT_EQ(shell("ddprun --help").rfind("usage: ddprun [-h]", 0), 0u);
    EXPECT_EQ(shell("ddprun --version"), std::string("ddprun ") + kVersion + "\n");
    EXPECT_EQ(shell("ddprund --version"), std::string("ddprund (ddprun) ") + kVersion + "\n");
    // hwloc, which ddprun loads when it reads the topology, came with it.
    const auto bound = inside({"ddprun", "--standalone", "--nproc-per-node=1",
                               "--numa-binding=node", "--no-python", "true"});
    EXPECT_EQ(bound.code, 0) << bound.output;
    // The etcd TLS module, which ddprun loads for protocol=https, came with
    // it: the join gets as far as the (absent) etcd.
    const auto tls = inside({"ddprun", "--nnodes", "2", "--rdzv-backend", "etcd-v3",
                             "--rdzv-endpoint", "127.0.0.1:1", "--rdzv-conf",
                             "protocol=https,join_timeout=1", "--no-python", "true"});
    EXPECT_NE(tls.code, 0) << tls.output;
    EXPECT_TRUE(contains(tls.output, "127.0.0.1:1: connection refused")) << tls.output;
    const auto torch = inside({"dpkg-query", "--show", "libtorch*"});
    EXPECT_NE(torch.code, 0) << "LibTorch came with the launcher:\n" << torch.output;
  }

  // ddprun finds the installed train on PATH, as a user types it.
  void expectTwoWorkerJobRuns() {
    EXPECT_EQ(shell("command -v train"), "/usr/bin/train\n");
    const auto job =
        inside({"ddprun", "--standalone", "--nproc-per-node=2", "train", "--task", "mlp",
                "--total-epochs", "2", "--save-every", "1", "--snapshot-path", "/tmp/snapshot.pt"});
    EXPECT_EQ(job.code, 0) << job.output;
    EXPECT_TRUE(contains(job.output, "world 2 (gloo)")) << job.output;
    EXPECT_TRUE(contains(job.output, "epoch 1/2 | loss")) << job.output;
    EXPECT_TRUE(contains(job.output, "throughput: samples=4096")) << job.output;
    EXPECT_TRUE(fs::is_regular_file(chroot_->path("/tmp/snapshot.pt")));
    phaseDone("the two-worker job");
  }

  void expectManPages() {
    for (const std::string program : {"ddprun", "ddprund", "train"}) {
      EXPECT_EQ(shell("man -w " + program), "/usr/share/man/man1/" + program + ".1.gz\n");
    }
    const std::string page = shell("MANPAGER=cat MANWIDTH=100 man ddprun");
    for (const std::string part : {"SYNOPSIS", "EXIT STATUS", "ENVIRONMENT", "--nproc-per-node"}) {
      EXPECT_TRUE(contains(page, part)) << part << " not in:\n" << page;
    }
  }

  void expectUnitVerifiedAndNotEnabled() {
    const std::string unit = "/usr/lib/systemd/system/ddprund.service";
    const std::string text = test_support::readFile(chroot_->path(unit));
    EXPECT_TRUE(contains(text, "\nExecStart=/usr/bin/ddprund --port 29400\n")) << text;
    EXPECT_TRUE(contains(text, "\nDynamicUser=yes\n")) << text;
    // A warning fails the test as an error does.
    const auto verify = inside({"systemd-analyze", "verify", unit});
    EXPECT_EQ(verify.code, 0) << verify.output;
    EXPECT_EQ(verify.output, "");
    const auto enabled = inside({"systemctl", "is-enabled", "ddprund.service"});
    EXPECT_EQ(enabled.output, "disabled\n");
    // symlink_status: an enable link is absolute, and would resolve on the host.
    EXPECT_FALSE(fs::exists(fs::symlink_status(
        chroot_->path("/etc/systemd/system/multi-user.target.wants/ddprund.service"))));
  }

  void expectCompletion() {
    EXPECT_TRUE(contains(shell("bash --norc -c '. /usr/share/bash-completion/completions/ddprun "
                               "&& complete -p ddprun'"),
                         " -F _ddprun ddprun\n"));
    EXPECT_EQ(test_support::readFile(chroot_->path("/usr/share/zsh/vendor-completions/_ddprun")),
              shell("ddprun --print-completion zsh"));
  }

  void expectPurgeRemovesEverything() {
    ASSERT_NO_FATAL_FAILURE(aptGet("purge ddprun ddprun-train", "apt-get purge"));
    for (const std::string file :
         {"/usr/bin/ddprun", "/usr/bin/ddprund", "/usr/bin/train",
          "/usr/lib/systemd/system/ddprund.service", "/usr/share/man/man1/ddprun.1.gz",
          "/usr/share/bash-completion/completions/ddprun", "/usr/share/ddprun"}) {
      EXPECT_FALSE(fs::exists(chroot_->path(file))) << file;
    }
  }

  test_support::TempDir scratch_{"ddprun-package-install"};
  std::optional<MachineTurn> turn_;
  std::optional<DebianChroot> chroot_;
  fs::path launcher_deb_;
  fs::path train_deb_;
  Clock::time_point phase_start_ = Clock::now();
};

TEST_F(PackageInstall, AptInstallsTheDebsIntoAFreshDebian12AndTheyRunFromThere) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root: debootstrap, chroot and mounts (run the suite as root)";
  }
  if (!haveDebootstrap()) {
    GTEST_SKIP() << "debootstrap is not installed (deploy/install-deps.sh installs it)";
  }
  const auto started = Clock::now();
  ASSERT_NO_FATAL_FAILURE(makePackages());
  ASSERT_NO_FATAL_FAILURE(bootstrap());
  ASSERT_NO_FATAL_FAILURE(aptGet("update", "apt-get update"));
  // A node without LibTorch: the launcher alone.
  ASSERT_NO_FATAL_FAILURE(
      aptGet("install --no-install-recommends ./ddprun_*.deb", "apt-get install ./ddprun_*.deb"));
  expectLauncherRunsWithoutLibTorch();
  ASSERT_NO_FATAL_FAILURE(aptGet("install --no-install-recommends ./ddprun-train_*.deb",
                                 "apt-get install ./ddprun-train_*.deb"));
  expectTwoWorkerJobRuns();
  // What an admin's node has and minbase lacks: man, and systemd's tools.
  ASSERT_NO_FATAL_FAILURE(
      aptGet("install --no-install-recommends man-db systemd", "apt-get install man-db systemd"));
  expectManPages();
  expectUnitVerifiedAndNotEnabled();
  expectCompletion();
  expectPurgeRemovesEverything();
  std::printf("package test: %.1f s in all\n",
              std::chrono::duration<double>(Clock::now() - started).count());
}

}  // namespace
}  // namespace ddprun
