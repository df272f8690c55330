// DdprunBinaryTest: runs the ddprun executable as a child with PATH and
// TMPDIR alone in its environment (plus extra_env_, whose PATH or TMPDIR, if
// it has one, replaces /usr/bin:/bin or the test's temp dir), its stdout and
// stderr captured in the test's temp dir. TMPDIR is where ddprun without
// --log-dir makes its logs: in the temp dir, they go when the test ends. Used
// by one test thread.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/proto/visible_gpus.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun/test_support/text.hpp"

namespace ddprun::launcher::testing {

struct Outcome {
  ExitStatus status;
  std::string stderr_text;
  std::string stdout_text;
};

using test_support::readFile;

class DdprunBinaryTest : public ::testing::Test {
 protected:
  // ddprun with `args`, its stdout and stderr in the test's directory as
  // "stdout" and "stderr", or "<name>.stdout" and "<name>.stderr" when
  // several run at once.
  Subprocess start(std::vector<std::string> args, const std::string& name = "") {
    SpawnOptions options;
    options.argv = {DDPRUN_BINARY};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.env = childEnvironment();
    const int stderr_fd =
        ::open(outputPath(name, "stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int stdout_fd =
        ::open(outputPath(name, "stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    options.stderr_fd = stderr_fd;
    options.stdout_fd = stdout_fd;
    Subprocess child(options);
    ::close(stderr_fd);
    ::close(stdout_fd);
    return child;
  }

  // ddprun's whole environment in start(), for a test that spawns ddprun
  // itself: extra_env_, then PATH and TMPDIR unless extra_env_ sets them.
  std::vector<std::pair<std::string, std::string>> childEnvironment() const {
    std::vector<std::pair<std::string, std::string>> env = extra_env_;
    const auto sets = [&](const std::string& variable) {
      return std::any_of(extra_env_.begin(), extra_env_.end(),
                         [&](const auto& entry) { return entry.first == variable; });
    };
    if (!sets("PATH")) {
      env.emplace_back("PATH", "/usr/bin:/bin");
    }
    if (!sets("TMPDIR")) {
      env.emplace_back("TMPDIR", dir_.path().string());
    }
    return env;
  }

  std::filesystem::path outputPath(const std::string& name, const std::string& stream) const {
    return dir_.path() / (name.empty() ? stream : name + "." + stream);
  }
  // What start(args, name) wrote to `stream` ("stdout" or "stderr").
  std::string outputOf(const std::string& name, const std::string& stream) const {
    return readFile(outputPath(name, stream));
  }

  Outcome run(std::vector<std::string> args) {
    Subprocess child = start(std::move(args));
    const ExitStatus status = child.wait();
    return outcome(status);
  }

  // Like run(), but a ddprun still running after `timeout` is SIGKILLed and
  // reported as such (status: killed by SIGKILL), so a hang fails the test.
  Outcome runFor(std::vector<std::string> args, std::chrono::milliseconds timeout) {
    Subprocess child = start(std::move(args));
    return waitFor(child, timeout);
  }

  // The outcome of a ddprun start() returned, SIGKILLed if it is still
  // running after `timeout`.
  Outcome waitFor(Subprocess& child, std::chrono::milliseconds timeout) {
    std::optional<ExitStatus> status;
    test_support::eventually([&] { return (status = child.tryWait()).has_value(); }, timeout,
                             std::chrono::milliseconds(20));
    if (!status) {
      child.signalGroup(SIGKILL);
      status = child.wait();
    }
    return outcome(*status);
  }

  Outcome outcome(const ExitStatus& status) const {
    return {status, readFile(dir_.path() / "stderr"), readFile(dir_.path() / "stdout")};
  }

  std::vector<std::string> fakeWorkers(int nproc, std::vector<std::string> worker_args) {
    std::vector<std::string> args = {"--standalone", "--nproc-per-node", std::to_string(nproc),
                                     "--no-python", DDPRUN_FAKE_WORKER};
    args.insert(args.end(), worker_args.begin(), worker_args.end());
    return args;
  }

  test_support::TempDir dir_;
  std::vector<std::pair<std::string, std::string>> extra_env_;
};

// The GPUs the agent under test will count: it gets no CUDA_VISIBLE_DEVICES.
inline proto::VisibleGpus gpusVisibleHere() { return proto::probeVisibleGpus(std::nullopt); }

// The one run directory under <log-dir>: <run id>_<random>.
inline std::filesystem::path runDir(const std::filesystem::path& log_dir) {
  return std::filesystem::directory_iterator(log_dir)->path();
}

using test_support::contains;
using test_support::countOf;

}  // namespace ddprun::launcher::testing
