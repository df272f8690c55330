// The hostlists both hostlist tests read: the unit test checks ddprun's
// expansion against the lists written here, and the scontrol test checks
// that Slurm's own `scontrol show hostnames` gives the same lists, refuses
// the same strings, and accepts (differently) the ones ddprun is stricter on.
#pragma once

#include <string>
#include <vector>

namespace ddprun::launcher::testing {

using Hosts = std::vector<std::string>;

struct ExpandedCase {
  std::string list;
  Hosts hosts;
};

// Valid lists and every host they name, in order.
inline const std::vector<ExpandedCase>& expandedCases() {
  static const std::vector<ExpandedCase> cases = {
      {"n1", {"n1"}},
      {"gpu[001-004,010],cpu[1-2],login",
       {"gpu001", "gpu002", "gpu003", "gpu004", "gpu010", "cpu1", "cpu2", "login"}},
      {"n[098-101]", {"n098", "n099", "n100", "n101"}},
      {"n[8-11]", {"n8", "n9", "n10", "n11"}},
      {"n[08-11]", {"n08", "n09", "n10", "n11"}},
      {"n[8-011]", {"n8", "n9", "n10", "n11"}},  // the first number's width pads
      {"a[01-2],b[7,09-10]", {"a01", "a02", "b7", "b09", "b10"}},
      {"n[1-3,2]", {"n1", "n2", "n3", "n2"}},  // duplicates kept, as Slurm keeps them
      {"b,a,b", {"b", "a", "b"}},
      {"[1-2]", {"1", "2"}},
      {"rack[1-2]-node[1-2]", {"rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"}},
      {"a[1-2][3-4]", {"a13", "a14", "a23", "a24"}},
      {"ab[1]c[2]d[3]", {"ab1c2d3"}},
      {"10.0.0.[1-2]", {"10.0.0.1", "10.0.0.2"}},
      {"host01-host03", {"host01-host03"}},
      {"n-1,n[2-2]", {"n-1", "n2"}},
      {"n[00000-00002]", {"n00000", "n00001", "n00002"}},
  };
  return cases;
}

// Lists Slurm refuses, and so does ddprun.
inline const std::vector<std::string>& refusedByBoth() {
  static const std::vector<std::string> lists = {
      "a[3-1]",     "a[1-3]b",  "n[9-10]x", "a.b[1-2].c", "a[1-2]:3",      "a[x]",
      "a[1-x]",     "a[]",      "a[1,,2]",  "n[1-2,]",    "a[1-2-3]",      "n[-1]",
      "n[0-65536]", "a[[1-2]]", "a[1-2]]",  "ok,n[5-4]",  "n[0-99999999]",
  };
  return lists;
}

// Lists ddprun refuses where Slurm 22.05 guesses, and what Slurm makes of them.
inline const std::vector<ExpandedCase>& refusedByDdprunOnly() {
  static const std::vector<ExpandedCase> cases = {
      {"", {}},
      {"a,,b", {"a", "b"}},
      {",a", {"a"}},
      {"a,", {"a"}},
      {"a[1-3", {"a]"}},
      {"a]", {"a]"}},
      {"a1-3]", {"a1-3]"}},
      {"a b", {"a", "b"}},
      {"x[ 1-2]", {"x01", "x02"}},
      {"n[1-]", {"n1"}},
      {"n[+1-2]", {"n01", "n02"}},
  };
  return cases;
}

}  // namespace ddprun::launcher::testing
