// store_bench's large-request table: ddprund's CPU for one request naming
// many keys (MULTI_SET, CHECK, WAIT, MULTI_GET), each sent in one write on
// one 2.2+ connection, as a 2.x client sends a large multi_set or a
// wait_for_keys. The server's cost of such a request should grow with its
// size, not with its square. A fresh ddprund per key count; needs no
// LibTorch. Runs on the caller's thread.
#pragma once

#include <filesystem>
#include <ostream>
#include <vector>

namespace ddprun::bench {

struct BigRequestOptions {
  std::filesystem::path ddprund;
  int ddprund_threads = 1;
  std::vector<int> keys = {16384, 131072};  // 131072: the default --max-keys
  int repeat = 3;                           // each request sent this many times
};

// Runs every key count (progress on stderr) and prints the table to `out`.
void runBigRequests(const BigRequestOptions& options, std::ostream& out);

}  // namespace ddprun::bench
