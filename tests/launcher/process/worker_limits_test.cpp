// The up-front check of --nproc-per-node against the machine's limits: the
// descriptors the agent needs per worker (RLIMIT_NOFILE), processes
// (RLIMIT_NPROC) and the kernel's pid_max, each named with its numbers.
#include "ddprun/launcher/process/worker_limits.hpp"

#include <gtest/gtest.h>

namespace ddprun::launcher {
namespace {

ProcessLimits roomy() {
  ProcessLimits limits;
  limits.open_files = 1024;
  limits.open_now = 3;
  limits.pid_max = 32768;
  return limits;
}

TEST(WorkerLimits, WorkersThatFitPass) {
  EXPECT_EQ(workerLimitProblem(1, roomy()), std::nullopt);
  // 3 held + 32 for the agent + 6 per worker: 1019 for 164 workers, 1025 for 165.
  EXPECT_EQ(workerLimitProblem(164, roomy()), std::nullopt);
  EXPECT_EQ(workerLimitProblem(100000, ProcessLimits{}), std::nullopt) << "no limits known";
}

TEST(WorkerLimits, TooFewDescriptorsNameRlimitNofileAndTheNumbers) {
  EXPECT_EQ(workerLimitProblem(165, roomy()),
            "165 workers need 1025 file descriptors in ddprun, over its limit of 1024 "
            "(RLIMIT_NOFILE; raise it with ulimit -n)");
  ProcessLimits tight = roomy();
  tight.open_files = 20;
  EXPECT_EQ(workerLimitProblem(1, tight),
            "1 worker needs 41 file descriptors in ddprun, over its limit of 20 (RLIMIT_NOFILE; "
            "raise it with ulimit -n)");
}

TEST(WorkerLimits, MoreWorkersThanProcessesAllowedNameTheLimit) {
  ProcessLimits limits = roomy();
  limits.open_files = 0;
  limits.processes = 100;
  EXPECT_EQ(workerLimitProblem(100, limits), std::nullopt);
  EXPECT_EQ(workerLimitProblem(101, limits),
            "101 workers are more processes than this user's limit of 100 (RLIMIT_NPROC; raise "
            "it with ulimit -u)");
  limits.processes = 0;
  EXPECT_EQ(workerLimitProblem(32768, limits),
            "32768 workers are more processes than the kernel has process ids for "
            "(kernel.pid_max 32768)");
}

TEST(WorkerLimits, ThisProcessHasLimitsToCheckAgainst) {
  const ProcessLimits limits = currentProcessLimits();
  EXPECT_GE(limits.open_now, 3u) << "stdin, stdout and stderr at least";
  EXPECT_GT(limits.pid_max, 0u);
}

}  // namespace
}  // namespace ddprun::launcher
