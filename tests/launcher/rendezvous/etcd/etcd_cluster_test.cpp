// The tests' etcd cluster fixture against real etcd members (etcd-server and
// etcd-client, which deploy/install-deps.sh installs): writes and reads, a
// killed leader replaced while two of three members serve, the killed member
// rejoining from its data directory, and TLS that trusts the cluster's CA and
// no other.
#include "ddprun/test_support/etcd_cluster.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/text.hpp"

namespace ddprun::test_support {
namespace {

using std::chrono::seconds;

// The value etcdctl's `get --print-value-only` printed, without its newline.
std::string valueOf(const EtcdctlResult& result) {
  std::string value = result.out;
  while (!value.empty() && value.back() == '\n') {
    value.pop_back();
  }
  return value;
}

TEST(EtcdClusterTest, ThreeMembersListTheirEndpointsAndServeWrites) {
  EtcdCluster cluster;
  ASSERT_EQ(cluster.size(), 3);
  EXPECT_EQ(cluster.endpoints(),
            cluster.endpoint(0) + "," + cluster.endpoint(1) + "," + cluster.endpoint(2));
  EXPECT_EQ(cluster.endpoint(1), "127.0.0.1:" + std::to_string(cluster.clientPort(1)));

  const auto put = cluster.etcdctl({"put", "/ddprun/key", "value"});
  ASSERT_TRUE(put.ok()) << put.err << cluster.logTail();
  for (int member = 0; member < cluster.size(); ++member) {
    const auto get =
        cluster.etcdctl({"get", "/ddprun/key", "--print-value-only"}, cluster.endpoint(member));
    EXPECT_TRUE(get.ok()) << get.err;
    EXPECT_EQ(valueOf(get), "value") << "member " << member;
  }
}

TEST(EtcdClusterTest, AKilledLeaderIsReplacedAndRejoinsWhenRestarted) {
  EtcdCluster cluster;
  const int old_leader = cluster.leader();
  cluster.kill(old_leader);
  EXPECT_FALSE(cluster.running(old_leader));

  const int new_leader = cluster.leader();
  EXPECT_NE(new_leader, old_leader);
  EXPECT_TRUE(cluster.running(new_leader));
  // Two of three members are a quorum: linearizable writes and reads work.
  std::string survivors;
  for (int member = 0; member < cluster.size(); ++member) {
    if (member != old_leader) {
      survivors += (survivors.empty() ? "" : ",") + cluster.endpoint(member);
    }
  }
  const auto put = cluster.etcdctl({"put", "/ddprun/after", "failover"}, survivors);
  ASSERT_TRUE(put.ok()) << put.err << cluster.logTail();
  const auto get = cluster.etcdctl({"get", "/ddprun/after", "--print-value-only"}, survivors);
  EXPECT_EQ(valueOf(get), "failover") << get.err;

  cluster.restart(old_leader);
  EXPECT_TRUE(cluster.running(old_leader));
  cluster.waitHealthy();
  // A serializable read answers from the member's own store: it shows the
  // write made while it was down once it has caught up with the others.
  EXPECT_TRUE(eventually(
      [&] {
        return valueOf(cluster.etcdctl(
                   {"get", "/ddprun/after", "--print-value-only", "--consistency=s"},
                   cluster.endpoint(old_leader))) == "failover";
      },
      seconds(10), std::chrono::milliseconds(50)))
      << cluster.logTail();
}

TEST(EtcdClusterTest, TlsMembersTrustTheirCaAndRefuseAnother) {
  EtcdCluster cluster({.members = 3, .tls = true});
  const EtcdTlsFiles& tls = cluster.tls();
  EXPECT_TRUE(std::filesystem::exists(tls.cert));
  EXPECT_TRUE(std::filesystem::exists(tls.key));

  const auto put = cluster.etcdctl({"put", "/ddprun/tls", "yes"});
  ASSERT_TRUE(put.ok()) << put.err << cluster.logTail();
  EXPECT_EQ(valueOf(cluster.etcdctl({"get", "/ddprun/tls", "--print-value-only"})), "yes");

  // A client that trusts another CA does not accept the members' certificate
  // (etcdctl retries until its deadline, so a short one keeps the test fast);
  // the same read with the cluster's CA still works afterwards.
  const auto refused = cluster.etcdctl(
      {"get", "/ddprun/tls", "--print-value-only", "--command-timeout=1s"}, "", tls.other_ca);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(valueOf(refused), "");
  EXPECT_EQ(valueOf(cluster.etcdctl({"get", "/ddprun/tls", "--print-value-only"})), "yes");
}

TEST(EtcdClusterTest, PlainClusterHasNoTlsFiles) {
  EtcdCluster cluster({.members = 1});
  EXPECT_EQ(cluster.size(), 1);
  EXPECT_EQ(cluster.leader(), 0);
  EXPECT_THROW(cluster.tls(), std::logic_error);
}

// Sets DDPRUN_ETCD for one test; puts back what was there.
class EtcdBinaryOverride {
 public:
  explicit EtcdBinaryOverride(const std::string& binary) {
    if (const char* previous = std::getenv("DDPRUN_ETCD")) {
      saved_ = previous;
    }
    ::setenv("DDPRUN_ETCD", binary.c_str(), 1);
  }
  ~EtcdBinaryOverride() {
    if (saved_) {
      ::setenv("DDPRUN_ETCD", saved_->c_str(), 1);
    } else {
      ::unsetenv("DDPRUN_ETCD");
    }
  }

 private:
  std::optional<std::string> saved_;
};

TEST(EtcdClusterTest, AMissingBinaryNamesThePackageThatInstallsIt) {
  const EtcdBinaryOverride missing("/nonexistent/etcd");
  EXPECT_EQ(EtcdCluster::binary(), "/nonexistent/etcd");
  try {
    EtcdCluster cluster({.members = 1});
    ADD_FAILURE() << "a cluster started without an etcd binary";
  } catch (const std::runtime_error& error) {
    EXPECT_TRUE(contains(error.what(), "deploy/install-deps.sh installs etcd-server"))
        << error.what();
  }
}

// A member that exits fails the start at once (not after the 30 s limit),
// saying how it ended, with what it wrote: here echo's line of the flags it
// was given.
TEST(EtcdClusterTest, AMemberThatExitsFailsTheStartWithItsOutput) {
  const EtcdBinaryOverride exits_at_once("/bin/echo");
  const auto started = std::chrono::steady_clock::now();
  try {
    EtcdCluster cluster({.members = 1});
    ADD_FAILURE() << "a cluster started with members that exit";
  } catch (const std::runtime_error& error) {
    EXPECT_TRUE(contains(error.what(), "member0 exited with code 0")) << error.what();
    EXPECT_TRUE(contains(error.what(), "--name member0 --data-dir")) << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(10));
}

}  // namespace
}  // namespace ddprun::test_support
