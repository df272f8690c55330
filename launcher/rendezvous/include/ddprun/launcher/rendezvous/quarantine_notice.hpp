// What an agent says when the rendezvous quarantines its host, the same for
// every backend that quarantines (c10d, etcd): one warning when it is told,
// and one error when the job ended without it. Free functions; they only log.
#pragma once

#include <string_view>

#include "ddprun/launcher/core/rendezvous.hpp"

namespace ddprun::launcher {

// "this host (h3) is quarantined by <rendezvous>: 2 group failure(s) started
// here first ...; it stands by as a spare until <this host's local time> (600
// s from now), unless the job needs it to keep 2 node(s)".
void sayQuarantined(const QuarantineNotice& notice, std::string_view rendezvous, int min_nodes);

// The job ended while this node stood by, quarantined: says so, and returns
// kUnfitExitCode, this agent's exit status (docs/launcher.md, Exit status).
int endedQuarantined();

}  // namespace ddprun::launcher
