// DistributedSampler: disjoint shards that cover the dataset, padding like
// PyTorch's, and a reshuffle per epoch that depends only on seed + epoch.
#include <gtest/gtest.h>

#include <set>

#include "ddprun/proto/errors.hpp"
#include "ddprun/worker/distributed_sampler.hpp"

namespace ddprun::worker {
namespace {

std::vector<int64_t> toVector(const torch::Tensor& indices) {
  return {indices.data_ptr<int64_t>(), indices.data_ptr<int64_t>() + indices.numel()};
}

TEST(DistributedSamplerTest, ShardsAreDisjointAndCoverTheDatasetWhenItDivides) {
  constexpr int kWorld = 4;
  std::multiset<int64_t> seen;
  for (int rank = 0; rank < kWorld; ++rank) {
    DistributedSampler sampler(2048, rank, kWorld, 7);
    EXPECT_EQ(sampler.samplesPerRank(), 512);
    for (int64_t index : toVector(sampler.indices(3))) {
      seen.insert(index);
    }
  }
  ASSERT_EQ(seen.size(), 2048u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 2048u) << "an index repeats";
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 2047);
}

TEST(DistributedSamplerTest, PadsByWrappingAroundLikePyTorch) {
  // 10 samples over 4 ranks: 3 each, 12 in all, so 2 indices appear twice.
  std::multiset<int64_t> seen;
  for (int rank = 0; rank < 4; ++rank) {
    DistributedSampler sampler(10, rank, 4, 0);
    EXPECT_EQ(sampler.samplesPerRank(), 3);
    EXPECT_EQ(sampler.batchesPerEpoch(2), 2);
    for (int64_t index : toVector(sampler.indices(0))) {
      seen.insert(index);
    }
  }
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 10u);
}

TEST(DistributedSamplerTest, PadsEvenWhenTheWorldIsLargerThanTheDataset) {
  DistributedSampler sampler(3, 6, 8, 0);
  const auto indices = toVector(sampler.indices(0));
  ASSERT_EQ(indices.size(), 1u);
  EXPECT_LT(indices[0], 3);
}

TEST(DistributedSamplerTest, ReshufflesPerEpochAndRepeatsForTheSameSeed) {
  DistributedSampler sampler(100, 1, 2, 42);
  DistributedSampler same(100, 1, 2, 42);
  DistributedSampler other_seed(100, 1, 2, 43);
  EXPECT_EQ(toVector(sampler.indices(5)), toVector(same.indices(5)));
  EXPECT_NE(toVector(sampler.indices(5)), toVector(sampler.indices(6)));
  EXPECT_NE(toVector(sampler.indices(5)), toVector(other_seed.indices(5)));
}

TEST(DistributedSamplerTest, OneRankOfOneGetsTheWholePermutation) {
  DistributedSampler sampler(50, 0, 1, 3);
  auto indices = toVector(sampler.indices(0));
  std::sort(indices.begin(), indices.end());
  for (int64_t i = 0; i < 50; ++i) {
    EXPECT_EQ(indices[static_cast<size_t>(i)], i);
  }
}

TEST(DistributedSamplerTest, RefusesARankOutsideTheWorld) {
  EXPECT_THROW(DistributedSampler(10, 4, 4, 0), ConfigError);
  EXPECT_THROW(DistributedSampler(0, 0, 1, 0), ConfigError);
}

}  // namespace
}  // namespace ddprun::worker
