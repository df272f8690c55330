// `ddprun status`: asks a c10d rendezvous (a ddprund, or the agent that
// hosts one) about its jobs and prints the answer, as a table or as JSON.
// Read-only: one connection, plain GETs of query keys (never a join, never
// a write), then exit. Runs on main's thread.
//
// Exit status: 0 when the rendezvous answered; 1 when it could not be asked
// (nothing answers at the endpoint, no answer within --timeout, not a ddprun
// rendezvous, an unknown run id, a static rendezvous); 2 for bad flags.
#pragma once

#include <string>
#include <vector>

namespace ddprun::launcher {

// `args`: what follows "status" on the command line.
int runStatusCommand(const std::vector<std::string>& args);

}  // namespace ddprun::launcher
