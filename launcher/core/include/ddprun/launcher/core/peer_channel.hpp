// One attempt's line between the agents of a worker group, for what one
// agent must ask of every other while the group runs: that each take its
// workers' stacks before a hung group is stopped (docs/launcher.md, Hung
// workers). A rendezvous with more than one node opens one per attempt
// (Rendezvous::openPeerChannel); one node has nobody to ask.
//
// Threads: the callbacks of listen() and askForStacks() run on the channel's
// own threads; answerStacks() may be called from any thread. Destruction
// stops those threads (an ask in progress ends without its callback).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace ddprun::launcher {

// Another node's agent asks this one for its workers' stacks.
struct StackRequest {
  int group_rank = 0;  // of the node that asks
  std::string why;     // one line: which rank of it hung, and how it was seen
};

// What one node answered: where its workers' stacks are.
struct StackAnswer {
  int group_rank = 0;
  std::string where;  // one line per worker, written by that node's agent
};

class PeerChannel {
 public:
  using Asked = std::function<void(const StackRequest&)>;
  using Answered = std::function<void(std::vector<StackAnswer> answers, std::vector<int> silent)>;

  virtual ~PeerChannel() = default;

  // `asked` runs (once per attempt: a group is stopped once) when another
  // node asks; this node then calls answerStacks().
  virtual void listen(Asked asked) = 0;
  // Asks every other node of the group, and calls `answered` once each has
  // answered or `bound` has passed: the answers, and the group ranks still
  // silent then.
  virtual void askForStacks(const std::string& why, std::chrono::milliseconds bound,
                            Answered answered) = 0;
  // This node's answer to the request listen() reported.
  virtual void answerStacks(const std::string& where) = 0;
};

}  // namespace ddprun::launcher
