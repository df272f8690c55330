// The hostfile of a multi-host launch (--hostfile) and the hosts and slots
// --include or --exclude pick from it, in DeepSpeed's formats so that its
// users' files and flags work unchanged:
//   hostfile  one host per line, "HOST slots=N"; blank lines and lines
//             starting with '#' are skipped, as is anything after the slots
//   selection HOST[:SLOT[,SLOT...]][@HOST[:SLOT...]...]: a host alone means
//             all its slots; --include keeps only those, --exclude drops them
// A slot is a local GPU index (0 .. slots-1). Pure functions; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher {

struct HostSlots {
  std::string host;
  int slots = 0;
  bool operator==(const HostSlots&) const = default;
};

// The hosts of a hostfile's text, in file order. `path` names the file in
// errors. Throws ConfigError naming the line and what is wrong with it:
// no "slots=N", a host given twice, no host at all.
std::vector<HostSlots> parseHostfile(std::string_view text, const std::string& path);

// The same, read from `path` (a regular file of at most 1 MiB); ConfigError
// when it cannot be read.
std::vector<HostSlots> readHostfile(const std::string& path);

// A host the launch uses, and the slots (GPU indexes) it uses there.
struct SelectedHost {
  std::string host;
  std::vector<int> slots;
  bool operator==(const SelectedHost&) const = default;
};

// The hosts and slots `include` or `exclude` leave of `hosts` (both empty:
// every slot of every host), in the hostfile's order, hosts left with no
// slot dropped. Throws ConfigError for a bad spec, a host not in the
// hostfile, a slot the host does not have, both selections given, or nothing
// left.
std::vector<SelectedHost> selectHosts(const std::vector<HostSlots>& hosts, std::string_view include,
                                      std::string_view exclude);

}  // namespace ddprun::launcher
