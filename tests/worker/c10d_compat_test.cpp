// c10d_compat picks each LibTorch version's constructor from the types alone.
// The types below have the shapes of the versions this LibTorch is not (its
// own is exercised by every train test): a ProcessGroup built from a store
// alone (2.6 on) or with options naming its backend (2.0 to 2.5), and each
// shape the Reducer's constructor has had.
#include "ddprun/worker/c10d_compat.hpp"

#include <gtest/gtest.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace ddprun::worker {
namespace {

struct FakeStore : c10::intrusive_ptr_target {};

// 2.6 on: ProcessGroup(store, rank, size), then setDefaultBackend.
struct GroupFromStore : c10::intrusive_ptr_target {
  enum BackendType { UNDEFINED = 0, GLOO = 1, NCCL = 2 };
  GroupFromStore(c10::intrusive_ptr<FakeStore> /*store*/, int rank_in, int size_in)
      : rank(rank_in), size(size_in) {}
  void setDefaultBackend(BackendType type) { default_backend = type; }
  int rank;
  int size;
  BackendType default_backend = UNDEFINED;
};

// 2.0 to 2.5: ProcessGroup(store, rank, size, Options(backend name)).
struct GroupWithOptions : c10::intrusive_ptr_target {
  struct Options : c10::intrusive_ptr_target {
    explicit Options(std::string name) : backend(std::move(name)) {}
    std::string backend;
  };
  GroupWithOptions(const c10::intrusive_ptr<FakeStore>& /*store*/, int rank_in, int size_in,
                   c10::intrusive_ptr<Options> options_in)
      : rank(rank_in), size(size_in), options(std::move(options_in)) {}
  int rank;
  int size;
  c10::intrusive_ptr<Options> options;
};

TEST(C10dCompatTest, AGroupBuiltFromTheStoreAloneGetsItsDefaultBackendSet) {
  const auto store = c10::make_intrusive<FakeStore>();
  const auto nccl = c10d_compat::makeGroup<GroupFromStore>(store, 3, 8, "nccl");
  EXPECT_EQ(nccl->rank, 3);
  EXPECT_EQ(nccl->size, 8);
  EXPECT_EQ(nccl->default_backend, GroupFromStore::NCCL);
  EXPECT_EQ(c10d_compat::makeGroup<GroupFromStore>(store, 0, 1, "gloo")->default_backend,
            GroupFromStore::GLOO);
}

TEST(C10dCompatTest, AGroupWithOptionsIsToldItsBackendByName) {
  const auto store = c10::make_intrusive<FakeStore>();
  const auto group = c10d_compat::makeGroup<GroupWithOptions>(store, 1, 2, "gloo");
  EXPECT_EQ(group->rank, 1);
  EXPECT_EQ(group->size, 2);
  EXPECT_EQ(group->options->backend, "gloo");
}

// Stand-ins for c10d::Reducer, one per constructor shape PyTorch has had.
using namespace c10d_compat::reducer_args;

// What a stand-in was given, for the checks.
struct Received {
  Indices bucket_indices;
  Limits bucket_limits;
  int64_t bucket_bytes_cap = 0;
  int64_t first_bucket_bytes_cap = 0;
  bool find_unused = true;
  bool gradient_as_bucket_view = true;
  Names names;
  std::vector<bool> trailing_flags;  // whatever flags followed first_bucket_bytes_cap
  bool cap_list_empty = false;
};

struct ReducerWithLimits {  // 1.13 to 2.6
  ReducerWithLimits(Tensors, Indices indices, Limits limits, Group, Sparse, int64_t cap,
                    bool find_unused, bool as_view, Names names, int64_t first_cap)
      : got{std::move(indices),
            std::move(limits),
            cap,
            first_cap,
            find_unused,
            as_view,
            std::move(names),
            {},
            false} {}
  Received got;
};

struct ReducerWithLimitsAndFlags {  // 2.7
  ReducerWithLimitsAndFlags(Tensors, Indices indices, Limits limits, Group, Sparse, int64_t cap,
                            bool find_unused, bool as_view, Names names, int64_t first_cap,
                            bool skip_unused, bool python_reducer)
      : got{std::move(indices),
            std::move(limits),
            cap,
            first_cap,
            find_unused,
            as_view,
            std::move(names),
            {skip_unused, python_reducer},
            false} {}
  Received got;
};

struct ReducerWithoutLimits {  // the limits dropped
  ReducerWithoutLimits(Tensors, Indices indices, Group, Sparse, int64_t cap, bool find_unused,
                       bool as_view, Names names, int64_t first_cap, bool skip_unused,
                       bool python_reducer)
      : got{std::move(indices),
            {},
            cap,
            first_cap,
            find_unused,
            as_view,
            std::move(names),
            {skip_unused, python_reducer},
            false} {}
  Received got;
};

struct ReducerWithCapList {  // per-bucket caps and batched_grad_copy added
  ReducerWithCapList(Tensors, Indices indices, Group, Sparse, int64_t cap, bool find_unused,
                     bool as_view, Names names, int64_t first_cap, bool skip_unused,
                     bool python_reducer, std::vector<int64_t> cap_list,
                     bool batched_grad_copy = false)
      : got{std::move(indices),
            {},
            cap,
            first_cap,
            find_unused,
            as_view,
            std::move(names),
            {skip_unused, python_reducer, batched_grad_copy},
            cap_list.empty()} {}
  Received got;
};

c10d_compat::ReducerArgs someArgs() {
  return {{}, {{1, 0}, {2}}, {100, 200}, {}, {false, false, false}, 25, {{0, "w"}}, 1};
}

// Everything but the version's own extras reaches each shape the same way.
void expectCommonArguments(const Received& got) {
  EXPECT_EQ(got.bucket_indices, (Indices{{1, 0}, {2}}));
  EXPECT_EQ(got.bucket_bytes_cap, 25);
  EXPECT_EQ(got.first_bucket_bytes_cap, 1);
  EXPECT_FALSE(got.find_unused);
  EXPECT_FALSE(got.gradient_as_bucket_view);
  EXPECT_EQ(got.names.at(0), "w");
}

TEST(C10dCompatTest, AReducerTakingBucketLimitsGetsThem) {
  const auto reducer = c10d_compat::makeReducer<ReducerWithLimits>(someArgs());
  expectCommonArguments(reducer->got);
  EXPECT_EQ(reducer->got.bucket_limits, (Limits{100, 200}));
  EXPECT_TRUE(reducer->got.trailing_flags.empty());
}

TEST(C10dCompatTest, AReducerWithThe27FlagsGetsDdpsDefaultsForThem) {
  const auto reducer = c10d_compat::makeReducer<ReducerWithLimitsAndFlags>(someArgs());
  expectCommonArguments(reducer->got);
  EXPECT_EQ(reducer->got.bucket_limits, (Limits{100, 200}));
  EXPECT_EQ(reducer->got.trailing_flags, (std::vector<bool>{false, false}));
}

TEST(C10dCompatTest, AReducerThatSizesItsBucketsItselfIsNotGivenTheLimits) {
  const auto reducer = c10d_compat::makeReducer<ReducerWithoutLimits>(someArgs());
  expectCommonArguments(reducer->got);
  EXPECT_EQ(reducer->got.trailing_flags, (std::vector<bool>{false, false}));
}

TEST(C10dCompatTest, AReducerWithPerBucketCapsGetsNoneSoEveryBucketUsesTheCap) {
  const auto reducer = c10d_compat::makeReducer<ReducerWithCapList>(someArgs());
  expectCommonArguments(reducer->got);
  EXPECT_TRUE(reducer->got.cap_list_empty);
  EXPECT_EQ(reducer->got.trailing_flags, (std::vector<bool>{false, false, false}));
}

}  // namespace
}  // namespace ddprun::worker
