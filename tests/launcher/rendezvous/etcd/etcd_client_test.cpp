// The etcd client against a real etcd cluster (tests/support's EtcdCluster):
// keys, transactions, leases, a watch, failover between members, and TLS.
#include "ddprun/launcher/etcd/etcd_client.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/test_support/etcd_cluster.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "etcd_http.hpp"

namespace ddprun::launcher::etcd {
namespace {

using namespace std::chrono_literals;
using test_support::EtcdCluster;

ClientOptions optionsFor(const std::string& endpoints) {
  ClientOptions options;
  options.members = parseMembers("endpoints", endpoints);
  options.request_timeout = 2s;
  return options;
}

class EtcdClientTest : public ::testing::Test {
 protected:
  // No etcd binary is a failure naming the package (EtcdCluster's
  // constructor), never a skip.
};

TEST_F(EtcdClientTest, PutGetAndPrefixRangeInKeyOrder) {
  EtcdCluster cluster({.members = 1});
  Client client(optionsFor(cluster.endpoints()));
  const std::int64_t first = client.put("/job/b", "two");
  const std::int64_t second = client.put("/job/a", std::string("one\0\xff", 5));
  client.put("/joc", "outside");
  EXPECT_GT(second, first);

  const Range one = client.get("/job/a");
  ASSERT_EQ(one.kvs.size(), 1u);
  EXPECT_EQ(one.kvs[0].value, std::string("one\0\xff", 5));
  EXPECT_EQ(one.kvs[0].create_revision, second);
  EXPECT_EQ(one.kvs[0].mod_revision, second);
  EXPECT_GE(one.revision, second);
  EXPECT_TRUE(client.get("/job/none").kvs.empty());

  const Range all = client.getPrefix("/job/");
  ASSERT_EQ(all.kvs.size(), 2u);
  EXPECT_EQ(all.kvs[0].key, "/job/a");
  EXPECT_EQ(all.kvs[1].key, "/job/b");
  EXPECT_EQ(all.kvs[1].value, "two");
}

TEST_F(EtcdClientTest, TxnCreatesOnlyWhenAbsent) {
  EtcdCluster cluster({.members = 1});
  Client client(optionsFor(cluster.endpoints()));
  const auto createIfAbsent = [&](const std::string& value) {
    return client.txn({{"/job/owner", Compare::Target::kCreateRevision, 0}},
                      {{Operation::Kind::kPut, "/job/owner", value, 0}},
                      {{Operation::Kind::kPut, "/job/loser", value, 0}});
  };
  const TxnResult first = createIfAbsent("first");
  EXPECT_TRUE(first.succeeded);
  const TxnResult second = createIfAbsent("second");
  EXPECT_FALSE(second.succeeded);
  EXPECT_GT(second.revision, first.revision);  // the failure branch wrote
  EXPECT_EQ(client.get("/job/owner").kvs.at(0).value, "first");
  EXPECT_EQ(client.get("/job/loser").kvs.at(0).value, "second");

  const std::int64_t mod = client.get("/job/owner").kvs.at(0).mod_revision;
  EXPECT_TRUE(client
                  .txn({{"/job/owner", Compare::Target::kModRevision, mod}},
                       {{Operation::Kind::kDeletePrefix, "/job/", "", 0}})
                  .succeeded);
  EXPECT_TRUE(client.getPrefix("/job/").kvs.empty());
}

TEST_F(EtcdClientTest, LeaseKeepsItsKeysUntilRevoked) {
  EtcdCluster cluster({.members = 1});
  Client client(optionsFor(cluster.endpoints()));
  const std::int64_t lease = client.grantLease(10s);
  client.put("/job/alive", "yes", lease);
  EXPECT_EQ(client.get("/job/alive").kvs.at(0).lease, lease);
  EXPECT_TRUE(client.keepAlive(lease));

  client.revokeLease(lease);
  EXPECT_FALSE(client.keepAlive(lease));
  EXPECT_TRUE(client.get("/job/alive").kvs.empty());
  client.revokeLease(lease);  // already gone: nothing to do
}

// etcd's own account of a lease: whole seconds left (rounded toward zero)
// and the TTL granted; nothing once it is revoked, or for one never granted.
TEST_F(EtcdClientTest, TimeToLiveSaysWhatIsLeftUntilTheLeaseIsGone) {
  EtcdCluster cluster({.members = 1});
  Client client(optionsFor(cluster.endpoints()));
  const std::int64_t lease = client.grantLease(10s);
  const auto reading = client.timeToLive(lease);
  ASSERT_TRUE(reading);
  EXPECT_EQ(reading->granted_ttl, 10);
  EXPECT_GE(reading->ttl, 8);
  EXPECT_LE(reading->ttl, 10);
  client.revokeLease(lease);
  EXPECT_EQ(client.timeToLive(lease), std::nullopt);
  EXPECT_EQ(client.timeToLive(lease + 1), std::nullopt);
}

TEST_F(EtcdClientTest, WatchSeesPutsAndDeletesInOrderAndCancelsPromptly) {
  EtcdCluster cluster({.members = 1});
  Client client(optionsFor(cluster.endpoints()));
  const std::int64_t start = client.put("/other", "x") + 1;
  Watch watch(client, "/job/", start);
  std::mutex mutex;
  std::vector<std::pair<WatchEvent, std::int64_t>> seen;
  std::thread runner([&] {
    watch.run([&](const std::vector<WatchEvent>& events, std::int64_t revision) {
      std::lock_guard lock(mutex);
      for (const auto& event : events) seen.emplace_back(event, revision);
    });
  });
  const std::int64_t put_a = client.put("/job/a", "1");
  client.put("/outside", "ignored");
  const std::int64_t put_b = client.put("/job/b", "2");
  const std::int64_t del_a = client.txn({}, {{Operation::Kind::kDelete, "/job/a", "", 0}}).revision;
  const auto count = [&] {
    std::lock_guard lock(mutex);
    return seen.size();
  };
  EXPECT_TRUE(test_support::eventually([&] { return count() >= 3; }, 10s));

  const auto before = std::chrono::steady_clock::now();
  watch.cancel();
  runner.join();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 1s);

  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].first.type, WatchEvent::Type::kPut);
  EXPECT_EQ(seen[0].first.kv.key, "/job/a");
  EXPECT_EQ(seen[0].first.kv.value, "1");
  EXPECT_EQ(seen[0].first.kv.mod_revision, put_a);
  // A batch's revision is where it brings the watcher, at or after its events.
  EXPECT_GE(seen[0].second, put_a);
  EXPECT_EQ(seen[1].first.kv.key, "/job/b");
  EXPECT_EQ(seen[1].first.kv.mod_revision, put_b);
  EXPECT_EQ(seen[2].first.type, WatchEvent::Type::kDelete);
  EXPECT_EQ(seen[2].first.kv.key, "/job/a");
  EXPECT_EQ(seen[2].first.kv.mod_revision, del_a);
  EXPECT_GE(seen[2].second, del_a);
}

// The watch is destroyed after run() has returned: its cancel() must not
// reach the connection run() made and freed (under ASan a use after free).
TEST_F(EtcdClientTest, WatchCancelledBeforeRunReturnsAtOnce) {
  EtcdCluster cluster({.members = 1});
  Client client(optionsFor(cluster.endpoints()));
  Watch watch(client, "/job/", 1);
  watch.cancel();
  watch.run([](const std::vector<WatchEvent>&, std::int64_t) { FAIL() << "an event"; });
}

// A watch from "now" (revision 0) says when it exists and at which revision:
// nothing before it is sent, everything after it is.
TEST_F(EtcdClientTest, AWatchFromNowSaysWhenItIsCreated) {
  EtcdCluster cluster({.members = 1});
  Client client(optionsFor(cluster.endpoints()));
  const std::int64_t before = client.put("/job/old", "1");
  Watch watch(client, "/job/", 0);
  std::int64_t created = 0;
  std::int64_t later = 0;
  std::vector<std::string> keys;
  watch.run(
      [&](const std::vector<WatchEvent>& events, std::int64_t) {
        for (const auto& event : events) keys.push_back(event.kv.key);
        watch.cancel();
      },
      [&](std::int64_t revision) {
        created = revision;
        later = client.put("/job/new", "2");  // from inside the callback: after creation
      });
  EXPECT_GE(created, before);
  EXPECT_GT(later, created);
  EXPECT_EQ(keys, (std::vector<std::string>{"/job/new"}));
}

TEST_F(EtcdClientTest, WatchFromACompactedRevisionThrowsWatchCompacted) {
  EtcdCluster cluster({.members = 1});
  Client client(optionsFor(cluster.endpoints()));
  client.put("/job/a", "1");
  const std::int64_t last = client.put("/job/a", "2");
  client.post("kv/compaction", "{\"revision\":\"" + std::to_string(last) + "\",\"physical\":true}");
  Watch watch(client, "/job/", 1);
  EXPECT_THROW(watch.run([](const std::vector<WatchEvent>&, std::int64_t) {}), WatchCompacted);
}

TEST_F(EtcdClientTest, WatchFailsOverFromADeadFirstMember) {
  EtcdCluster cluster({.members = 1});
  Client client(optionsFor("127.0.0.1:" + std::to_string(test_support::freeLoopbackPort()) + "," +
                           cluster.endpoints()));
  const std::int64_t revision = client.put("/job/a", "1");
  Watch watch(client, "/job/", revision);
  std::int64_t got = 0;
  std::thread runner([&] {
    watch.run([&](const std::vector<WatchEvent>& events, std::int64_t) {
      got = events.at(0).kv.mod_revision;
      watch.cancel();
    });
  });
  runner.join();
  EXPECT_EQ(got, revision);
}

TEST_F(EtcdClientTest, CallFailsOverFromADeadFirstMember) {
  EtcdCluster cluster({.members = 3});
  // A follower dies later, so that the others keep a leader.
  const int leader = cluster.leader();
  const int victim = (leader + 1) % 3;
  const std::string dead = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  Client client(optionsFor(dead + "," + cluster.endpoint(victim) + "," + cluster.endpoint(leader) +
                           "," + cluster.endpoint((leader + 2) % 3)));
  EXPECT_EQ(client.currentMember(), 0u);
  client.put("/job/a", "1");
  EXPECT_EQ(client.currentMember(), 1u);
  EXPECT_EQ(client.get("/job/a").kvs.at(0).value, "1");
  EXPECT_EQ(client.currentMember(), 1u);

  cluster.kill(victim);
  EXPECT_EQ(client.get("/job/a").kvs.at(0).value, "1");
  EXPECT_EQ(client.currentMember(), 2u);
}

TEST_F(EtcdClientTest, CallsReuseOneKeptAliveConnection) {
  EtcdCluster cluster({.members = 1});
  Client client(optionsFor(cluster.endpoints()));
  const std::int64_t lease = client.grantLease(5s);
  for (int i = 0; i < 10; ++i) {
    client.put("/job/k" + std::to_string(i), std::to_string(i), lease);
    EXPECT_EQ(client.get("/job/k" + std::to_string(i)).kvs.at(0).value, std::to_string(i));
    EXPECT_TRUE(client.keepAlive(lease));
  }
  EXPECT_EQ(client.getPrefix("/job/").kvs.size(), 10u);
  EXPECT_EQ(client.connectionsOpened(), 1u);
}

TEST_F(EtcdClientTest, ConcurrentCallsOpenOneConnectionEachAtMost) {
  EtcdCluster cluster({.members = 1});
  Client client(optionsFor(cluster.endpoints()));
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&client, t] {
      for (int i = 0; i < 20; ++i) {
        client.put("/job/t" + std::to_string(t) + "/" + std::to_string(i), "v");
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(client.getPrefix("/job/").kvs.size(), 80u);
  EXPECT_GE(client.connectionsOpened(), 1u);
  EXPECT_LE(client.connectionsOpened(), static_cast<std::size_t>(kThreads));
}

TEST_F(EtcdClientTest, AKeptConnectionToARestartedMemberIsReplaced) {
  EtcdCluster cluster({.members = 1});
  Client client(optionsFor(cluster.endpoints()));
  client.put("/job/a", "1");
  cluster.kill(0);
  cluster.restart(0);
  // The idle connection was closed by the killed member: the put must not
  // be lost on it, nor fail over (there is no other member).
  client.put("/job/b", "2");
  EXPECT_EQ(client.get("/job/a").kvs.at(0).value, "1");
  EXPECT_EQ(client.get("/job/b").kvs.at(0).value, "2");
  EXPECT_EQ(client.connectionsOpened(), 2u);
}

TEST_F(EtcdClientTest, NoMemberServingGivesOneLineNamingEachMember) {
  const std::string first = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  const std::string second = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  Client client(optionsFor(first + "," + second));
  try {
    client.get("/job/a");
    FAIL() << "no EtcdUnavailable";
  } catch (const EtcdUnavailable& e) {
    EXPECT_EQ(std::string(e.what()),
              "etcd at " + first + "," + second + ": no member served /v3/kv/range (" + first +
                  ": connection refused; " + second + ": connection refused)");
  }
}

// A watch is cancelled by aborting its connection from another thread; an
// abort that comes while the connection is still being opened (its host
// resolved) must stop it too, not leave it to the first answer's deadline.
TEST_F(EtcdClientTest, AConnectionAbortedBeforeItOpensDoesNotOpen) {
  EtcdCluster cluster({.members = 1});
  const ClientOptions options = optionsFor(cluster.endpoints());
  auto connection = detail::newConnection(options, options.members.at(0), nullptr);
  connection->abort();
  EXPECT_THROW(connection->open(std::chrono::steady_clock::now() + 2s), detail::MemberFailure);

  auto untouched = detail::newConnection(options, options.members.at(0), nullptr);
  untouched->open(std::chrono::steady_clock::now() + 2s);
  EXPECT_EQ(
      untouched->post("/v3/kv/range", R"({"key":"YQ=="})", std::chrono::steady_clock::now() + 2s)
          .status,
      200u);
}

// TLS is ddprun's module (launcher/rendezvous/etcd/tls/), which ddprun
// finds beside itself; a client in this test program names it.
class EtcdClientTlsTest : public EtcdClientTest {
 protected:
  static ClientOptions tlsOptions(const EtcdCluster& cluster, const std::string& ca) {
    ClientOptions options = optionsFor(cluster.endpoints());
    options.tls = true;
    options.tls_module = DDPRUN_ETCD_TLS_MODULE;
    options.ca_file = ca;
    options.cert_file = cluster.tls().cert;
    options.key_file = cluster.tls().key;
    return options;
  }
};

TEST_F(EtcdClientTlsTest, ServesWithTheRightCaAndClientCertificate) {
  EtcdCluster cluster({.members = 1, .tls = true});
  Client client(tlsOptions(cluster, cluster.tls().ca));
  const std::int64_t revision = client.put("/job/tls", "yes");
  EXPECT_EQ(client.get("/job/tls").kvs.at(0).value, "yes");
  EXPECT_EQ(client.connectionsOpened(), 1u);  // one TLS handshake for both calls

  Watch watch(client, "/job/", revision);
  std::int64_t got = 0;
  watch.run([&](const std::vector<WatchEvent>& events, std::int64_t) {
    got = events.at(0).kv.mod_revision;
    watch.cancel();
  });
  EXPECT_EQ(got, revision);
}

TEST_F(EtcdClientTlsTest, AMismatchedCaGivesOneLineNamingTls) {
  EtcdCluster cluster({.members = 1, .tls = true});
  Client client(tlsOptions(cluster, cluster.tls().other_ca));
  try {
    client.get("/job/a");
    FAIL() << "no EtcdUnavailable";
  } catch (const EtcdUnavailable& e) {
    const std::string message = e.what();
    EXPECT_NE(
        message.find(cluster.endpoint(0) + ": TLS handshake failed: certificate verify failed"),
        std::string::npos)
        << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST_F(EtcdClientTlsTest, AMissingCaFileIsAConfigErrorNamingIt) {
  EtcdCluster cluster({.members = 1, .tls = true});
  try {
    Client client(tlsOptions(cluster, "/nonexistent/ca.pem"));
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot load the CA file '/nonexistent/ca.pem'"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(EtcdClientTlsTest, AModuleThatCannotBeLoadedIsAConfigErrorNamingIt) {
  ClientOptions options = optionsFor({"127.0.0.1:1"});
  options.tls = true;
  options.tls_module = "/nonexistent/ddprun-etcd-tls.so";
  try {
    Client client(options);
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("etcd over TLS needs ddprun's TLS module "
                            "/nonexistent/ddprun-etcd-tls.so: ",
                            0),
              0u)
        << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST_F(EtcdClientTlsTest, PlainHttpToATlsMemberIsNamed) {
  EtcdCluster cluster({.members = 1, .tls = true});
  Client client(optionsFor(cluster.endpoints()));
  try {
    client.get("/job/a");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TLS"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ddprun::launcher::etcd
