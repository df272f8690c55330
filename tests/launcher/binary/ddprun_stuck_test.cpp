// Workers stuck in the kernel (docs/launcher.md, Workers stuck in the kernel;
// docs/torchrun-contract.md §7.1), with processes really in uninterruptible
// sleep: each holds or closes a file of a FUSE file system whose server
// (unanswering_fuse) never answers a flush, so the kernel waits for the
// answer in state D and SIGKILL cannot end the wait. The agent must not wait
// with it: it ends with exit status 122 and one line naming the process,
// its state, wchan and kernel stack. At the end the server is killed, which
// aborts the connection; the stuck process then dies, and this test, a
// child subreaper while it runs, reaps it: nothing is left behind. Needs
// root and /dev/fuse; skipped, saying which, without them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <string>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/launcher/supervision/procfs.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test_support::readFile;
using testing::contains;
using testing::countOf;
using testing::DdprunBinaryTest;
using testing::Outcome;

constexpr int kStuckExit = 122;

class DdprunStuckTest : public DdprunBinaryTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root, to mount a FUSE file system";
    }
    if (::access("/dev/fuse", R_OK | W_OK) != 0) {
      GTEST_SKIP() << "needs /dev/fuse, which this machine lacks";
    }
    ::prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper_);
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // the stuck process comes here once ddprun is gone
    if (const std::optional<std::string> why_not = startServer()) {
      GTEST_SKIP() << "cannot mount a FUSE file system here: " << *why_not;
    }
  }

  void TearDown() override {
    server_.reset();  // aborts the connection: whatever waits on it goes on
    if (stuck_pid_ > 0) {
      EXPECT_TRUE(test_support::eventually(
          [&] { return ::waitpid(stuck_pid_, nullptr, WNOHANG) != 0; }, 20s, 20ms))
          << "pid " << stuck_pid_ << " still lives once the FUSE connection was aborted";
    }
    removeLeftCgroups();
    ::prctl(PR_SET_CHILD_SUBREAPER, was_subreaper_);
  }

  // Starts unanswering_fuse; why not when it cannot mount.
  std::optional<std::string> startServer() {
    const fs::path mountpoint = dir_.path() / "mnt";
    fs::create_directory(mountpoint);
    SpawnOptions options;
    options.argv = {DDPRUN_UNANSWERING_FUSE, mountpoint.string()};
    const int out = ::open((dir_.path() / "fuse.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open((dir_.path() / "fuse.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    options.stdout_fd = out;
    options.stderr_fd = err;
    server_ = std::make_unique<Subprocess>(options);
    ::close(out);
    ::close(err);
    std::optional<ExitStatus> ended;
    test_support::eventually(
        [&] {
          return contains(readFile(dir_.path() / "fuse.out"), "ready") ||
                 (ended = server_->tryWait()).has_value();
        },
        10s, 10ms);
    if (!contains(readFile(dir_.path() / "fuse.out"), "ready")) {
      return readFile(dir_.path() / "fuse.err");
    }
    hang_file_ =
        "/proc/" + std::to_string(server_->pid()) + "/root" + mountpoint.string() + "/hang";
    return std::nullopt;
  }

  // A worker script, run with the file to hang on in HANG_FILE.
  std::string script(const std::string& name, const std::string& body) {
    const fs::path path = dir_.path() / name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    fs::permissions(path, fs::perms::owner_all);
    extra_env_.emplace_back("HANG_FILE", hang_file_);
    extra_env_.emplace_back("READY", (dir_.path() / "opened").string());
    return path.string();
  }

  // The pid the agent's line names: "ddprun: local rank 0 (rank 0, pid 123, "
  // for a worker, "ddprun: pid 123 (" for what the workers left.
  pid_t namedPid(const std::string& stderr_text) {
    std::smatch found;
    const std::regex named(R"(ddprun: (?:local rank \d+ \(rank \d+, )?pid (\d+)[,( ])");
    if (std::regex_search(stderr_text, found, named)) {
      stuck_pid_ = std::stoi(found[1].str());
    }
    return stuck_pid_;
  }

  // The job's cgroups the stuck process kept from being removed (the
  // guardian names each it could not remove), once it is gone.
  void removeLeftCgroups() {
    const std::string text = readFile(dir_.path() / "stderr");
    const std::regex left(R"(cannot remove the job's cgroups (\S+)<n>, one per attempt)");
    for (std::sregex_iterator it(text.begin(), text.end(), left), end; it != end; ++it) {
      const std::string prefix = (*it)[1].str();  // "<parent>/ddprun-<pid>-<start time>-"
      const fs::path parent = fs::path(prefix).parent_path();
      std::error_code ignored;
      for (const auto& entry : fs::directory_iterator(parent, ignored)) {
        if (entry.path().string().rfind(prefix, 0) == 0) {
          fs::remove(entry.path(), ignored);
        }
      }
    }
  }

  // What the test shows of the agent's line, for whoever reads the log.
  void show(const Outcome& out) {
    std::cout << "ddprun's stderr:\n"
              << out.stderr_text << "unanswered: " << readFile(dir_.path() / "fuse.err")
              << std::endl;
  }

  std::unique_ptr<Subprocess> server_;
  std::string hang_file_;
  pid_t stuck_pid_ = -1;
  int was_subreaper_ = 0;
};

// Local rank 0 holds the file open; local rank 1 fails. Stopping the group,
// SIGTERM ends rank 0's sleep, and its exit then waits for ever on the flush
// of that file: SIGKILL changes nothing. With restarts left, the agent still
// ends, 1 s (the variable) after the SIGKILL.
TEST_F(DdprunStuckTest, AWorkerAliveAfterItsSigkillEndsTheAgentWith122) {
  const std::string worker = script("hold.sh",
                                    "if [ \"$LOCAL_RANK\" = 0 ]; then\n"
                                    "  exec 3<\"$HANG_FILE\"\n"
                                    "  : > \"$READY\"\n"
                                    "  exec sleep 600\n"
                                    "fi\n"
                                    "while [ ! -e \"$READY\" ]; do sleep 0.05; done\n"
                                    "exit 3\n");
  extra_env_.emplace_back("TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", "1");
  const Outcome out = runFor({"--standalone", "--nproc-per-node", "2", "--max-restarts", "2",
                              "--shutdown-timeout", "1", "--no-python", worker},
                             60s);
  show(out);
  EXPECT_EQ(out.status, (ExitStatus{ExitStatus::Kind::Exited, kStuckExit})) << out.stderr_text;
  EXPECT_TRUE(contains(out.stderr_text,
                       "is still alive 1 s after SIGKILL: state D "
                       "(uninterruptible sleep), wchan "))
      << out.stderr_text;
  EXPECT_TRUE(contains(out.stderr_text, "kernel stack ")) << out.stderr_text;
  EXPECT_TRUE(contains(out.stderr_text, "fuse_flush")) << out.stderr_text;  // root reads it
  EXPECT_FALSE(contains(out.stderr_text, "restarting the worker group")) << out.stderr_text;
  const pid_t pid = namedPid(out.stderr_text);
  ASSERT_GT(pid, 0) << out.stderr_text;
  const auto stat = readProcStat(pid);
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->state, 'D') << "pid " << pid << " is not in uninterruptible sleep";
}

// torch's D-state check: the only worker closes the file, and close(2) waits
// on the flush, interruptibly until a signal its handler takes (a child sends
// SIGUSR1 every 0.1 s) interrupts that wait; from then on it waits in state D.
// Alive and running, it has been in D for the variable's 1 s: the group is
// stopped with no restart and, in D for good after SIGTERM and SIGKILL, the
// worker is named once.
TEST_F(DdprunStuckTest, ARunningWorkerInUninterruptibleSleepPastTheTimeoutEndsTheAgent) {
  const std::string worker = script("close.sh",
                                    "trap : USR1\n"
                                    "(while kill -USR1 $$ 2>/dev/null; do sleep 0.1; done) &\n"
                                    "exec 3<\"$HANG_FILE\"\n"
                                    "exec 3<&-\n");
  extra_env_.emplace_back("TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", "1");
  const Outcome out = runFor({"--standalone", "--nproc-per-node", "1", "--max-restarts", "2",
                              "--shutdown-timeout", "1", "--no-python", worker},
                             60s);
  show(out);
  EXPECT_EQ(out.status, (ExitStatus{ExitStatus::Kind::Exited, kStuckExit})) << out.stderr_text;
  EXPECT_TRUE(contains(out.stderr_text,
                       "(TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT): stopping the workers; no "
                       "restart"))
      << out.stderr_text;
  EXPECT_TRUE(contains(out.stderr_text, "has been in uninterruptible sleep for "))
      << out.stderr_text;
  EXPECT_TRUE(contains(out.stderr_text, "state D (uninterruptible sleep), wchan "))
      << out.stderr_text;
  EXPECT_TRUE(contains(out.stderr_text, "fuse_flush")) << out.stderr_text;
  EXPECT_EQ(countOf(out.stderr_text, "ddprun: local rank 0 "), 1) << out.stderr_text;
  EXPECT_FALSE(contains(out.stderr_text, "restarting the worker group")) << out.stderr_text;
  const pid_t pid = namedPid(out.stderr_text);
  ASSERT_GT(pid, 0) << out.stderr_text;
  const auto stat = readProcStat(pid);
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->state, 'D') << "pid " << pid << " is not in uninterruptible sleep";
}

// What a worker leaves behind counts too: rank 0 starts a child in a session
// of its own, which holds the file open, and fails. Killed with the rest of
// the attempt before the restart, the child waits for ever in its exit, on
// the flush; the agent names it with the attempt that left it, and does not
// restart. Its state is what the kill made it: D after a SIGKILL, but S
// after cgroup.kill (which leaves no signal pending in the exiting process:
// it waits interruptibly, and no signal reaches a process that exits), so
// the test asks the kernel stack, not the letter.
TEST_F(DdprunStuckTest, ALeftoverAliveAfterItsSigkillEndsTheAgentWith122) {
  const std::string worker = script("leave.sh",
                                    "setsid sh -c 'exec 3<\"$HANG_FILE\"; : > \"$READY\"; "
                                    "exec sleep 600' &\n"
                                    "while [ ! -e \"$READY\" ]; do sleep 0.05; done\n"
                                    "exit 3\n");
  extra_env_.emplace_back("TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT", "1");
  const Outcome out = runFor({"--standalone", "--nproc-per-node", "1", "--max-restarts", "2",
                              "--shutdown-timeout", "1", "--no-python", worker},
                             60s);
  show(out);
  EXPECT_EQ(out.status, (ExitStatus{ExitStatus::Kind::Exited, kStuckExit})) << out.stderr_text;
  EXPECT_TRUE(contains(out.stderr_text,
                       "), left by the workers of attempt 0, is still alive 1 s "
                       "after SIGKILL: state "))
      << out.stderr_text;
  EXPECT_TRUE(contains(out.stderr_text, "fuse_flush")) << out.stderr_text;
  EXPECT_FALSE(contains(out.stderr_text, "restarting the worker group")) << out.stderr_text;
  const pid_t pid = namedPid(out.stderr_text);
  ASSERT_GT(pid, 0) << out.stderr_text;
  const std::string stack = readFile("/proc/" + std::to_string(pid) + "/stack");
  EXPECT_TRUE(contains(stack, "fuse_flush") && contains(stack, "do_exit")) << stack;
}

// Without the variable (torch's default: no D-state check), a SIGKILLed
// worker still gets a bounded wait, the shutdown timeout but never under
// 5 s, so the agent does not wedge either.
TEST_F(DdprunStuckTest, WithoutTheVariableAKilledWorkerGetsFiveSecondsToDie) {
  const std::string worker = script("hold.sh",
                                    "if [ \"$LOCAL_RANK\" = 0 ]; then\n"
                                    "  exec 3<\"$HANG_FILE\"\n"
                                    "  : > \"$READY\"\n"
                                    "  exec sleep 600\n"
                                    "fi\n"
                                    "while [ ! -e \"$READY\" ]; do sleep 0.05; done\n"
                                    "exit 3\n");
  const Outcome out = runFor(
      {"--standalone", "--nproc-per-node", "2", "--shutdown-timeout", "1", "--no-python", worker},
      60s);
  EXPECT_EQ(out.status, (ExitStatus{ExitStatus::Kind::Exited, kStuckExit})) << out.stderr_text;
  EXPECT_TRUE(contains(out.stderr_text, "is still alive 5 s after SIGKILL: state D "))
      << out.stderr_text;
  EXPECT_GT(namedPid(out.stderr_text), 0) << out.stderr_text;
}

}  // namespace
}  // namespace ddprun::launcher
