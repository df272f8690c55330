// train keeps only the NCCL error-handling name its LibTorch reads (the
// agent sets both; PyTorch 2.2 and later warn at every start about the old).
#include "ddprun/worker/nccl_environment.hpp"

#include <gtest/gtest.h>

namespace ddprun::worker {
namespace {

TEST(NcclEnvironmentTest, ALibTorchBefore22KeepsBothNames) {
  for (const auto& [major, minor] : {std::pair{1, 13}, std::pair{2, 0}, std::pair{2, 1}}) {
    const auto change = renameLegacyNcclVariable(major, minor, "1", "1");
    EXPECT_FALSE(change.set_modern) << major << "." << minor;
    EXPECT_FALSE(change.unset_legacy) << major << "." << minor;
  }
}

TEST(NcclEnvironmentTest, From22TheAgentsOldNameIsDroppedAndTheNewOneKept) {
  for (const auto& [major, minor] : {std::pair{2, 2}, std::pair{2, 11}, std::pair{3, 0}}) {
    const auto change = renameLegacyNcclVariable(major, minor, "1", "1");
    EXPECT_FALSE(change.set_modern) << major << "." << minor;
    EXPECT_TRUE(change.unset_legacy) << major << "." << minor;
  }
}

TEST(NcclEnvironmentTest, AUsersOldNameAloneKeepsItsValueUnderTheNewName) {
  const auto change = renameLegacyNcclVariable(2, 11, std::nullopt, "0");
  EXPECT_EQ(change.set_modern, "0");
  EXPECT_TRUE(change.unset_legacy);
}

TEST(NcclEnvironmentTest, TheNewNameWinsWhenBothDisagreeAsLibTorchDecides) {
  const auto change = renameLegacyNcclVariable(2, 11, "0", "1");
  EXPECT_FALSE(change.set_modern);
  EXPECT_TRUE(change.unset_legacy);
}

TEST(NcclEnvironmentTest, NeitherSetChangesNothing) {
  const auto change = renameLegacyNcclVariable(2, 11, std::nullopt, std::nullopt);
  EXPECT_FALSE(change.set_modern);
  EXPECT_FALSE(change.unset_legacy);
}

}  // namespace
}  // namespace ddprun::worker
