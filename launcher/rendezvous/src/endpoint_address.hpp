// Which address a c10d agent hosts the rendezvous on, and which it tells the
// others its workers' store is at, when the endpoint's name is this
// machine's own. Debian's installer maps a machine's own name to 127.0.1.1
// in /etc/hosts: resolved here, "n1" is loopback, while every other node
// reaches n1 by its network address. Binding what the name resolves to
// here, or advertising the loopback address this agent reached the endpoint
// from, would leave every other node outside (docs/launcher.md, "The c10d
// rendezvous hosted by an agent").
//
// Pure functions of their arguments; safe on any thread.
#pragma once

#include <string>

namespace ddprun::launcher {

// Whether `host` means loopback on every machine: "localhost", or an IP
// literal in 127.0.0.0/8 or ::1. A job at such an endpoint has every node on
// one machine.
bool namesLoopbackEverywhere(const std::string& host);

// The address to bind the rendezvous at endpoint `host` to, given
// `resolved`, what `host` resolves to here: `resolved` itself, except for a
// name that resolves to loopback here alone, which is bound on every
// address ("") so that the others reach it by theirs.
std::string rendezvousBindAddress(const std::string& host, const std::string& resolved);

// The workers' store address to advertise, given the endpoint's `host` and
// `local_address`, the address this agent's connection to the endpoint came
// from: that address, except when it is loopback and `host` is a name other
// machines resolve (the endpoint is this machine): then `host` itself, the
// name the other nodes already reach this machine by.
std::string advertisedStoreHost(const std::string& host, const std::string& local_address);

}  // namespace ddprun::launcher
