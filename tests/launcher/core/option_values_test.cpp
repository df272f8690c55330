// Table tests for the value parsers: endpoints (docs/torchrun-contract.md
// §3.6), rendezvous config, -r/-t maps, signal lists and filter lists.
#include "ddprun/launcher/core/option_values.hpp"

#include <gtest/gtest.h>

#include <csignal>

#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

template <typename Fn>
std::string errorOf(Fn fn) {
  try {
    fn();
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "<no error>";
}

TEST(EndpointParser, AcceptedForms) {
  const std::vector<std::tuple<std::string, std::string, int>> cases = {
      {"", "localhost", 29400},
      {"   ", "localhost", 29400},
      {"host", "host", 29400},
      {"host:1", "host", 1},
      {" host:65535 ", "host", 65535},
      {"10.0.0.1:0", "10.0.0.1", 0},
      {"a-b.c_d:29500", "a-b.c_d", 29500},
      {"[::1]", "::1", 29400},
      {"[::1]:80", "::1", 80},
      {"[fe80::1%eth0]", "fe80::1%eth0", 29400},  // link-local, with its interface
      {"[fe80::1%eth0]:29603", "fe80::1%eth0", 29603},
      {"[fe80::1%2]:1", "fe80::1%2", 1},
      {"::1", ":", 1},  // unbracketed IPv6 splits on the last colon, as torchrun does
  };
  for (const auto& [text, host, port] : cases) {
    SCOPED_TRACE(text);
    if (host == "<error>") {
      EXPECT_NE(errorOf([&] { parseEndpoint("--rdzv-endpoint", text, 29400); }), "<no error>");
      continue;
    }
    EXPECT_EQ(parseEndpoint("--rdzv-endpoint", text, 29400), (Endpoint{host, port}));
  }
}

TEST(EndpointParser, Errors) {
  const std::string bad_port = "the port must be an integer between 0 and 65535";
  const std::string bad_host =
      "the host must be a DNS name, an IPv4 address or an IPv6 address (a link-local one with "
      "its interface: fe80::1%eth0)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"host:", bad_port},         {"host:65536", bad_port},
      {"host:123456", bad_port},   {"host:-1", bad_port},
      {"host:1a", bad_port},       {"[::1]:x", bad_port},
      {"ho st:1", bad_host},       {":1", bad_host},
      {"h/x", bad_host},           {"[]:1", bad_host},
      {"[host%eth0]:1", bad_host}, {"[fe80::1%eth 0]:1", bad_host},
      {"[fe80::1%]:1", bad_host},
  };
  for (const auto& [text, why] : cases) {
    EXPECT_EQ(errorOf([&] { parseEndpoint("--rdzv-endpoint", text, 29400); }),
              "--rdzv-endpoint '" + text + "': " + why);
  }
}

TEST(EndpointParser, NoDefaultPortGivesMinusOne) {
  EXPECT_EQ(parseEndpoint("x", "host", -1).port, -1);
}

TEST(RdzvConfParser, SplitsTrimsAndKeepsTheLastRepeat) {
  using Map = std::map<std::string, std::string>;
  EXPECT_EQ(parseRdzvConf("c", ""), Map{});
  EXPECT_EQ(parseRdzvConf("c", "  "), Map{});
  EXPECT_EQ(parseRdzvConf("c", " a = 1 , b=x=y ,a=2"), (Map{{"a", "2"}, {"b", "x=y"}}));
  EXPECT_EQ(errorOf([] { parseRdzvConf("--rdzv-conf", "a=1,"); }),
            "--rdzv-conf 'a=1,': expected KEY=VALUE,... (an item has no key)");
  EXPECT_EQ(errorOf([] { parseRdzvConf("--rdzv-conf", "a= "); }),
            "--rdzv-conf 'a= ': option 'a' has no value");
}

TEST(StdSpecParser, UniformAndPerRank) {
  EXPECT_EQ(parseStdSpec("-r", "2").forLocalRank(7), Std::kErr);
  const auto map = parseStdSpec("-r", "0:1,3:3,0:2");
  EXPECT_EQ(map.forLocalRank(0), Std::kErr);  // a repeated rank keeps the last
  EXPECT_EQ(map.forLocalRank(3), Std::kAll);
  EXPECT_EQ(map.forLocalRank(1), Std::kNone);
  for (const std::string bad : {"", "4", "01", "0:4", "0:1,", "a:1", "10:1", "0:1;1:2", " 1"}) {
    EXPECT_NE(errorOf([&] { parseStdSpec("-r", bad); }), "<no error>") << bad;
  }
}

TEST(SignalParser, NamesToNumbers) {
  EXPECT_EQ(parseSignals("s", "SIGUSR1, SIGUSR2 ,SIGTERM"),
            (std::vector<int>{SIGUSR1, SIGUSR2, SIGTERM}));
  EXPECT_EQ(parseSignals("s", "SIGRTMIN"), std::vector<int>{SIGRTMIN});
  for (const std::string bad : {"", "USR1", "sigusr1", "10", "SIGUSR1,", "SIG_IGN", "SIGSTOP"}) {
    EXPECT_NE(errorOf([&] { parseSignals("s", bad); }), "<no error>") << bad;
  }
}

TEST(FilterListParser, DoubleCommaIsAComma) {
  using V = std::vector<std::string>;
  EXPECT_EQ(parseFilterList(""), V{});
  EXPECT_EQ(parseFilterList("a,b"), (V{"a", "b"}));
  EXPECT_EQ(parseFilterList("loss,,acc,x"), (V{"loss,acc", "x"}));
  EXPECT_EQ(parseFilterList("a,,,b"), (V{"a,", "b"}));
  EXPECT_EQ(parseFilterList(",a,"), (V{"a"}));
}

TEST(IntParsers, PythonIntLike) {
  EXPECT_EQ(parseInt("x", " +3 ", 0, 10), 3);
  EXPECT_EQ(errorOf([] { parseInt("x", "3.0", 0, 10); }), "x '3.0': not an integer");
  EXPECT_EQ(errorOf([] { parseInt("x", "+-3", -10, 10); }), "x '+-3': not an integer");
  EXPECT_EQ(errorOf([] { parseInt("x", "99999999999999999999", 0, 10); }),
            "x '99999999999999999999': not an integer");
  EXPECT_TRUE(parseEnvBool("x", "-1"));
  EXPECT_FALSE(parseEnvBool("x", "+0"));
  EXPECT_NE(errorOf([] { parseEnvBool("x", "true"); }), "<no error>");
  EXPECT_NE(errorOf([] { parseEnvBool("x", ""); }), "<no error>");
}

TEST(NnodesParser, Forms) {
  EXPECT_EQ(parseNnodes("n", "3"), std::make_pair(3, 3));
  EXPECT_EQ(parseNnodes("n", "1:4"), std::make_pair(1, 4));
  for (const std::string bad : {"", ":", "1:", "0:2", "-1", "2:1", "1:2:3", "a"}) {
    EXPECT_NE(errorOf([&] { parseNnodes("n", bad); }), "<no error>") << bad;
  }
}

TEST(MonitorIntervalParser, Forms) {
  EXPECT_DOUBLE_EQ(parsePositiveDouble("m", "0.5"), 0.5);
  EXPECT_DOUBLE_EQ(parsePositiveDouble("m", "1e-2"), 0.01);
  for (const std::string bad : {"", "-1", "0", "nan", "inf", "1s"}) {
    EXPECT_NE(errorOf([&] { parsePositiveDouble("m", bad); }), "<no error>") << bad;
  }
}

TEST(NonNegativeSecondsParser, ZeroIsAllowed) {
  EXPECT_DOUBLE_EQ(parseNonNegativeDouble("t", "0"), 0.0);
  EXPECT_DOUBLE_EQ(parseNonNegativeDouble("t", " 2.5 "), 2.5);
  for (const std::string bad : {"", "-0.1", "nan", "inf", "5s"}) {
    EXPECT_NE(errorOf([&] { parseNonNegativeDouble("t", bad); }), "<no error>") << bad;
  }
}

}  // namespace
}  // namespace ddprun::launcher
