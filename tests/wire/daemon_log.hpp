// Finding ddprund's log lines about one client connection. ddprund names a
// peer as "<address>:<port>" (IPv4 peers of a dual-stack listener appear as
// "[::ffff:127.0.0.1]:<port>"), so lines are matched on the loopback address
// plus the client's own port. Pure functions over captured stderr text.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::wire_test {

// The first warning-level line that names the loopback client whose local
// port is `peer_port`, or nullopt.
std::optional<std::string> warningAboutPeer(std::string_view log, std::uint16_t peer_port);

// True if `line` contains any of `words`, ignoring case.
bool mentionsAny(std::string_view line, std::initializer_list<std::string_view> words);

}  // namespace ddprun::wire_test
