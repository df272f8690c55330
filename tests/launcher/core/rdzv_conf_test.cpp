// --rdzv-conf, typed once: every key a torchrun backend reads, torchrun's
// defaults, and a bad key or value as one line naming both.
#include "ddprun/launcher/core/rdzv_conf.hpp"

#include <gtest/gtest.h>

#include "launcher_test_util.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using testing::parse;
using testing::parseError;

TEST(RdzvConf, DefaultsAreTorchruns) {
  const RdzvConf conf = parse({"--nnodes", "2", "t.py"}).rdzv_conf;
  EXPECT_EQ(conf, RdzvConf{});
  EXPECT_EQ(conf.staticTimeout(), 900s);
  EXPECT_EQ(conf.joinTimeout(), 600s);
  EXPECT_EQ(conf.lastCallTimeout(), 30s);
  EXPECT_EQ(conf.keepAliveInterval(), 5s);
  EXPECT_EQ(conf.keepAliveMaxAttempt(), 3);
  EXPECT_FALSE(conf.is_host);
  EXPECT_EQ(conf.quarantineAfter(), 3);
  EXPECT_EQ(conf.quarantineDuration(), 600s);
}

TEST(RdzvConf, EveryKeyIsTyped) {
  const RdzvConf conf =
      parse({"--rdzv-conf",
             "join_timeout=12,last_call_timeout=0.5,keep_alive_interval=2,keep_alive_max_attempt="
             "4,is_host=yes,close_timeout=3,read_timeout=4,heartbeat_timeout=5,store_type=tcp,"
             "rank=1,use_libuv=0,protocol=https,cacert=/ca.pem,quarantine_after=0,"
             "quarantine_seconds=90",
             "t.py"})
          .rdzv_conf;
  EXPECT_EQ(conf.joinTimeout(), 12s);
  EXPECT_EQ(conf.lastCallTimeout(), 500ms);
  EXPECT_EQ(conf.keepAliveInterval(), 2s);
  EXPECT_EQ(conf.keepAliveMaxAttempt(), 4);
  EXPECT_EQ(conf.is_host, true);
  EXPECT_EQ(conf.close_timeout, 3s);
  EXPECT_EQ(conf.read_timeout, 4s);
  EXPECT_EQ(conf.heartbeat_timeout, 5s);
  EXPECT_EQ(conf.etcd.at("protocol"), "https");
  EXPECT_EQ(conf.etcd.at("cacert"), "/ca.pem");
  EXPECT_EQ(conf.quarantineAfter(), 0);
  EXPECT_EQ(conf.quarantineDuration(), 90s);
}

// torchrun's static backend reads `timeout`; its c10d ignores it, which
// surprises users, so ddprun's c10d reads it when join_timeout is absent.
TEST(RdzvConf, TimeoutIsStaticsAndC10dsJoinTimeoutUnlessGiven) {
  const RdzvConf timeout = parse({"--rdzv-conf", "timeout=60", "t.py"}).rdzv_conf;
  EXPECT_EQ(timeout.staticTimeout(), 60s);
  EXPECT_EQ(timeout.joinTimeout(), 60s);
  const RdzvConf both = parse({"--rdzv-conf", "timeout=60,join_timeout=9", "t.py"}).rdzv_conf;
  EXPECT_EQ(both.joinTimeout(), 9s);
  EXPECT_EQ(both.staticTimeout(), 60s);
}

TEST(RdzvConf, IsHostTakesTorchrunsBoolWords) {
  for (const std::string yes : {"1", "true", "t", "yes", "y"}) {
    EXPECT_EQ(parse({"--rdzv-conf", "is_host=" + yes, "t.py"}).rdzv_conf.is_host, true) << yes;
  }
  for (const std::string no : {"0", "false", "f", "no", "n"}) {
    EXPECT_EQ(parse({"--rdzv-conf", "is_host=" + no, "t.py"}).rdzv_conf.is_host, false) << no;
  }
}

// etcd's connection settings are checked with the flags, before anything
// starts: a protocol etcd does not speak, TLS files over plain http, a
// client certificate without its key.
TEST(RdzvConf, EtcdConnectionSettingsAreCheckedWithTheFlags) {
  EXPECT_EQ(parseError({"--rdzv-conf", "protocol=ftp", "t.py"}),
            "--rdzv-conf protocol 'ftp': etcd speaks http or https");
  EXPECT_EQ(parseError({"--rdzv-conf", "cacert=/ca.pem", "t.py"}),
            "--rdzv-conf cacert '/ca.pem': a TLS setting needs protocol=https (http is the "
            "default)");
  EXPECT_EQ(parseError({"--rdzv-conf", "protocol=http,ssl_cert=/c.pem,key=/k.pem", "t.py"}),
            "--rdzv-conf ssl_cert '/c.pem': a TLS setting needs protocol=https (http is the "
            "default)");
  EXPECT_EQ(parseError({"--rdzv-conf", "protocol=https,cert=/c.pem", "t.py"}),
            "--rdzv-conf cert '/c.pem': cert and key go together: a client certificate needs "
            "its key");
  const RdzvConf tls =
      parse({"--rdzv-conf", "protocol=https,ca_cert=/a,ssl_cert=/c,ssl_cert_key=/k", "t.py"})
          .rdzv_conf;
  EXPECT_EQ(tls.etcd.at("ssl_cert_key"), "/k");
}

TEST(RdzvConf, ABadKeyOrValueIsOneLineNamingBoth) {
  EXPECT_EQ(parseError({"--rdzv-conf", "timeout=abc", "t.py"}),
            "--rdzv-conf timeout 'abc': not a number");
  EXPECT_EQ(parseError({"--rdzv-conf", "join_timeout=0", "t.py"}),
            "--rdzv-conf join_timeout '0': must be greater than 0");
  EXPECT_EQ(parseError({"--rdzv-conf", "keep_alive_interval=-1", "t.py"}),
            "--rdzv-conf keep_alive_interval '-1': must be greater than 0");
  EXPECT_EQ(parseError({"--rdzv-conf", "keep_alive_interval=0", "t.py"}),
            "--rdzv-conf keep_alive_interval '0': must be greater than 0");
  EXPECT_EQ(parseError({"--rdzv-conf", "keep_alive_max_attempt=0", "t.py"}),
            "--rdzv-conf keep_alive_max_attempt '0': must be >= 1");
  // Each within bounds, their product (the daemon's keep-alive timeout) not.
  EXPECT_EQ(
      parseError({"--rdzv-conf", "keep_alive_interval=1e9,keep_alive_max_attempt=10", "t.py"}),
      "--rdzv-conf keep_alive_interval x keep_alive_max_attempt '1e9 x 10': more seconds "
      "than ddprun can wait (at most 1e9)");
  EXPECT_EQ(parseError({"--rdzv-conf", "is_host=maybe", "t.py"}),
            "--rdzv-conf is_host 'maybe': expected 1, true, t, yes, y or 0, false, f, no, n");
  EXPECT_EQ(parseError({"--rdzv-conf", "quarantine_after=-1", "t.py"}),
            "--rdzv-conf quarantine_after '-1': must be >= 0");
  EXPECT_EQ(parseError({"--rdzv-conf", "quarantine_seconds=0", "t.py"}),
            "--rdzv-conf quarantine_seconds '0': must be greater than 0");
  EXPECT_EQ(parseError({"--rdzv-conf", "store_type=file", "t.py"}),
            "--rdzv-conf store_type 'file': ddprun's stores are TCP stores (store_type=tcp)");
  EXPECT_EQ(parseError({"--rdzv-conf", "timeout=1e12", "t.py"}),
            "--rdzv-conf timeout '1e12': more seconds than ddprun can wait (at most 1e9)");
  const std::string unknown = parseError({"--rdzv-conf", "join_timeuot=5", "t.py"});
  EXPECT_EQ(unknown.rfind("--rdzv-conf join_timeuot '5': unknown key (ddprun knows ", 0), 0u)
      << unknown;
  EXPECT_NE(unknown.find("join_timeout"), std::string::npos) << unknown;
  EXPECT_EQ(parseError({"t.py"}, {{"PET_RDZV_CONF", "is_host=2"}}),
            "PET_RDZV_CONF (--rdzv-conf) is_host '2': expected 1, true, t, yes, y or 0, false, f, "
            "no, n");
}

}  // namespace
}  // namespace ddprun::launcher
