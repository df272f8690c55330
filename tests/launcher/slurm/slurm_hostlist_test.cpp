// Slurm's hostlist syntax expanded by ddprun: the lists of
// slurm_hostlist_cases.hpp (which the scontrol test holds Slurm to), the
// first host and the count without expanding, and each refusal's line.
#include "ddprun/launcher/slurm/slurm_hostlist.hpp"

#include <gtest/gtest.h>

#include "slurm_hostlist_cases.hpp"

namespace ddprun::launcher {
namespace {

using testing::Hosts;

// The HostlistError's line, or "<no error>".
template <typename Call>
std::string refusal(Call call) {
  try {
    call();
  } catch (const HostlistError& error) {
    return error.what();
  }
  return "<no error>";
}

TEST(SlurmHostlist, ExpandsEachListInOrder) {
  for (const auto& [list, hosts] : testing::expandedCases()) {
    SCOPED_TRACE(list);
    EXPECT_EQ(expandHostlist(list), hosts);
    EXPECT_EQ(firstHost(list), hosts.front());
    EXPECT_EQ(hostCount(list), hosts.size());
  }
}

TEST(SlurmHostlist, RefusesWhatSlurmRefusesAndWhatItGuessesAt) {
  std::vector<std::string> lists = testing::refusedByBoth();
  for (const auto& refused : testing::refusedByDdprunOnly()) {
    lists.push_back(refused.list);
  }
  for (const std::string& list : lists) {
    SCOPED_TRACE(list);
    EXPECT_THROW(expandHostlist(list), HostlistError);
    EXPECT_THROW(firstHost(list), HostlistError);
    EXPECT_THROW(hostCount(list), HostlistError);
  }
}

TEST(SlurmHostlist, EachRefusalIsOneLineNamingTheListAndWhy) {
  EXPECT_EQ(refusal([] { expandHostlist("a[3-1]"); }),
            "hostlist 'a[3-1]': the range 3-1 is reversed");
  EXPECT_EQ(refusal([] { expandHostlist("a[1-3]b"); }),
            "hostlist 'a[1-3]b': text 'b' after the last bracket of 'a[1-3]b' (Slurm refuses it "
            "too)");
  EXPECT_EQ(refusal([] { firstHost("n1,a[1-3"); }), "hostlist 'n1,a[1-3': a '[' without ']'");
  EXPECT_EQ(refusal([] { firstHost("a]"); }), "hostlist 'a]': a ']' without '[' at offset 1");
  EXPECT_EQ(refusal([] { firstHost("a[1[2]]"); }),
            "hostlist 'a[1[2]]': a '[' inside a bracket at offset 3");
  EXPECT_EQ(refusal([] { firstHost(""); }), "hostlist '': is empty");
  EXPECT_EQ(refusal([] { firstHost("a,,b"); }), "hostlist 'a,,b': an empty item");
  EXPECT_EQ(refusal([] { firstHost("a b"); }),
            "hostlist 'a b': a blank or control character at offset 1");
  EXPECT_EQ(refusal([] { firstHost("a[1,,2]"); }),
            "hostlist 'a[1,,2]': '' in [1,,2] is not a number or a range lo-hi");
  EXPECT_EQ(refusal([] { firstHost("n[1-]"); }),
            "hostlist 'n[1-]': '1-' in [1-] is not a number or a range lo-hi");
  EXPECT_EQ(refusal([] { firstHost("n[0-65536]"); }),
            "hostlist 'n[0-65536]': the range 0-65536 has more than 65536 hosts (Slurm's limit)");
  EXPECT_EQ(refusal([] { firstHost("n[1234567890123456789]"); }),
            "hostlist 'n[1234567890123456789]': the number 1234567890123456789 has more than 18 "
            "digits");
}

TEST(SlurmHostlist, AWholeListIsBoundedWhereBracketsMultiply) {
  // 65536 x 65536 hosts: each range is within Slurm's bound, their product is not.
  EXPECT_EQ(refusal([] { firstHost("a[0-65535]b[0-65535]"); }),
            "hostlist 'a[0-65535]b[0-65535]': names more than 1048576 hosts");
  const std::string at_the_bound = "a[0-15]b[0-65535]";  // 16 x 65536 = 1048576
  EXPECT_EQ(hostCount(at_the_bound), kMaxHostsInList);
  EXPECT_EQ(refusal([] { hostCount("a[0-15]b[0-65535],c"); }),
            "hostlist 'a[0-15]b[0-65535],c': names more than 1048576 hosts");
}

TEST(SlurmHostlist, ALargeListsFirstHostCountAndHosts) {
  const std::string list = "gpu[00001-50000],cpu[00001-50000]";
  EXPECT_EQ(firstHost(list), "gpu00001");
  EXPECT_EQ(hostCount(list), 100000u);
  const Hosts hosts = expandHostlist(list);
  ASSERT_EQ(hosts.size(), 100000u);
  EXPECT_EQ(hosts[49999], "gpu50000");
  EXPECT_EQ(hosts[50000], "cpu00001");
  EXPECT_EQ(hosts.back(), "cpu50000");
}

TEST(SlurmHostlist, FirstHostTakesEachBracketsFirstNumber) {
  EXPECT_EQ(firstHost("rack[07,1-2]-node[3-4]x[5]"), "rack07-node3x5");
  EXPECT_EQ(firstHost("[9-10],a"), "9");
}

}  // namespace
}  // namespace ddprun::launcher
