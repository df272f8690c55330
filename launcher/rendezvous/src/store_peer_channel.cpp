#include "ddprun/launcher/rendezvous/store_peer_channel.hpp"

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/client.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;

// A listener waits in slices so that it also notices a store that is gone
// (the wait then fails) rather than block on it forever.
constexpr auto kListenSlice = 5s;
// How long an agent asked for its stacks may take to give its answer.
constexpr auto kAnswerBound = 30s;
constexpr auto kConnectTimeout = 2s;

}  // namespace

StorePeerChannel::StorePeerChannel(WorkerGroup group) : group_(std::move(group)) {}

StorePeerChannel::~StorePeerChannel() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (rdzv::StoreClient* client : {listening_, asking_}) {
      if (client != nullptr) {
        client->interrupt();
      }
    }
  }
  answer_ready_.notify_all();
  for (std::thread* thread : {&listener_, &asker_}) {
    if (thread->joinable()) {
      thread->join();
    }
  }
}

std::string StorePeerChannel::askedKey() const {
  return "ddprun/stacks/" + std::to_string(group_.attempt) + "/asked";
}

std::string StorePeerChannel::answerKey(int group_rank) const {
  return "ddprun/stacks/" + std::to_string(group_.attempt) + "/answer/" +
         std::to_string(group_rank);
}

void StorePeerChannel::listen(Asked asked) {
  listener_ = std::thread([this, asked = std::move(asked)] { listenFor(asked); });
}

void StorePeerChannel::askForStacks(const std::string& why, std::chrono::milliseconds bound,
                                    Answered answered) {
  if (asker_.joinable()) {
    return;  // one ask per attempt: a group is stopped once
  }
  asker_ = std::thread(
      [this, why, bound, answered = std::move(answered)] { ask(why, bound, answered); });
}

void StorePeerChannel::answerStacks(const std::string& where) {
  {
    std::lock_guard lock(mutex_);
    answer_ = where;
  }
  answer_ready_.notify_all();
}

std::unique_ptr<rdzv::StoreClient> StorePeerChannel::connect(rdzv::StoreClient*& slot,
                                                             std::chrono::milliseconds timeout) {
  // Once: the store is up before the group starts, and a destructor that
  // joins this thread must not wait out a retry against a host that is gone.
  auto client = std::make_unique<rdzv::StoreClient>(group_.store_host, group_.store_port, timeout,
                                                    rdzv::StoreClient::Connect::kOnce);
  std::lock_guard lock(mutex_);
  if (stopping_) {
    return nullptr;
  }
  slot = client.get();
  return client;
}

void StorePeerChannel::forget(rdzv::StoreClient*& slot) {
  std::lock_guard lock(mutex_);
  slot = nullptr;
}

// The request is "<group rank>\n<why>"; an agent's own request is not for it.
void StorePeerChannel::listenFor(const Asked& asked) {
  std::unique_ptr<rdzv::StoreClient> client;
  try {
    client = connect(listening_, kConnectTimeout);
    if (!client) {
      return;
    }
    for (;;) {
      try {
        client->wait({askedKey()}, kListenSlice);
        break;
      } catch (const TimeoutError&) {
        // Nobody asked yet.
      }
    }
    const std::string request = client->get(askedKey());
    const auto newline = request.find('\n');
    StackRequest parsed{std::stoi(request.substr(0, newline)),
                        newline == std::string::npos ? "" : request.substr(newline + 1)};
    if (parsed.group_rank == group_.group_rank) {
      forget(listening_);
      return;
    }
    asked(parsed);
    std::unique_lock lock(mutex_);
    answer_ready_.wait_for(lock, kAnswerBound, [this] { return stopping_ || answer_; });
    if (stopping_ || !answer_) {
      listening_ = nullptr;
      return;
    }
    const std::string answer = *answer_;
    lock.unlock();
    client->set(answerKey(group_.group_rank), answer);
  } catch (const std::exception& error) {
    // The store went with its group (a new round, node 0 lost): nobody can
    // ask any more. Said only at debug level: it is how a group usually ends.
    log().debug("stack requests of round {}: no longer listening: {}", group_.attempt,
                error.what());
  }
  forget(listening_);
}

void StorePeerChannel::ask(const std::string& why, std::chrono::milliseconds bound,
                           const Answered& answered) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  std::vector<std::string> keys;
  std::vector<int> ranks;
  for (int rank = 0; rank < group_.group_world_size; ++rank) {
    if (rank != group_.group_rank) {
      keys.push_back(answerKey(rank));
      ranks.push_back(rank);
    }
  }
  std::vector<StackAnswer> answers;
  std::vector<int> silent;
  try {
    auto client = connect(asking_, bound);
    if (!client) {
      return;
    }
    client->set(askedKey(), std::to_string(group_.group_rank) + "\n" + why);
    try {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      client->wait(keys, std::max(left, std::chrono::milliseconds(1)));
    } catch (const TimeoutError&) {
      // Some are silent: those that answered still count.
    }
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (client->check({keys[i]})) {
        answers.push_back({ranks[i], client->get(keys[i])});
      } else {
        silent.push_back(ranks[i]);
      }
    }
  } catch (const std::exception& error) {
    log().warn("could not ask the other nodes for their stacks: {}", error.what());
    silent = ranks;
    answers.clear();
  }
  forget(asking_);
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      return;
    }
  }
  answered(std::move(answers), std::move(silent));
}

}  // namespace ddprun::launcher
