// Slurm's hostlist syntax, as SLURM_STEP_NODELIST and SLURM_JOB_NODELIST
// carry it: comma-separated items, each a plain host name or text with
// bracketed number lists, `gpu[001-004,010],cpu[1-2],login`. A bracket holds
// numbers and ranges (`lo-hi`) separated by commas; each number is printed
// zero-padded to the width its range's first number is written with
// (`n[098-101]` gives n098 n099 n100 n101, `n[8-11]` gives n8 ... n11). An
// item may have several brackets (`rack[1-2]-node[1-4]`), the leftmost
// varying slowest, and must end with one: Slurm 22.05 refuses text after the
// last bracket (`a[1-3]b`). Order and duplicates are kept, as
// `scontrol show hostnames` keeps them.
//
// Written here rather than taken from libslurm (whose hostlist_create is the
// reference): ddprun must run where Slurm's libraries are not installed (a
// container inside a Slurm job), and the syntax is small.
//
// ddprun refuses everything Slurm 22.05 refuses (reversed ranges, garbage in
// brackets, a range of more than 65536 hosts, text after the last bracket)
// and is stricter where Slurm guesses: an empty list or item, an unbalanced
// bracket (Slurm keeps `a]` as a name and turns `a[1-3` into `a]`), blanks
// (Slurm also splits on them, and pads `x[ 1-2]` to x01 x02), `n[1-]`, and
// signs. Slurm never writes these into a job's environment, so one of them
// there means the variable was mangled. A whole list is also refused above
// 1048576 hosts (several brackets multiply).
//
// Pure functions; safe on any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {

// A hostlist ddprun refuses. what() is "hostlist '<list>': <why>"; reason()
// is <why> alone, for a caller that names the variable the list came from.
class HostlistError : public ConfigError {
 public:
  HostlistError(std::string_view list, const std::string& reason);
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

// Slurm's own bound on one range (MAX_RANGE in its hostlist.c).
inline constexpr std::size_t kMaxHostsInRange = 65536;
// ddprun's bound on a whole list.
inline constexpr std::size_t kMaxHostsInList = 1048576;

// Every host of `list`, in order. Throws HostlistError.
std::vector<std::string> expandHostlist(std::string_view list);

// The first host of `list` (the whole list is checked, nothing is expanded:
// cheap for any size). Throws HostlistError.
std::string firstHost(std::string_view list);

// How many hosts `list` names, without expanding it. Throws HostlistError.
std::size_t hostCount(std::string_view list);

}  // namespace ddprun::launcher
