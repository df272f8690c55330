// ElasticMembership's reader thread and the rounds it learns: the reader
// reads this agent's events, session by session (every join starts one),
// through blocking GETs on a connection of its own, and hands them to
// nextRound()/finish() under mutex_, calling the change callback when the
// running round is over. The connection, requests and reconnection are the
// lease thread's (elastic_lease.cpp).
//
// Exception boundaries: the reader catches every error; a dropped connection
// is the loss of the rendezvous (the lease thread recovers), a malformed
// event ends the membership with an error. nextRound() throws to its caller.
#include "ddprun/launcher/rendezvous/elastic_membership.hpp"

#include <algorithm>

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/rendezvous/wait_notice.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/visible_text.hpp"

namespace ddprun::launcher {
namespace {

namespace protocol = proto::rendezvous;
using protocol::EventType;

// The event reader waits for the daemon's next push for as long as the run
// lasts; shutdown interrupts it, it never times out in practice.
constexpr std::chrono::hours kEventWait{24 * 365};

ElasticRound roundFrom(const protocol::Event& event) {
  return {event.round,      event.group_rank,      event.group_world_size,
          event.base_rank,  event.world_size,      event.store_host,
          event.store_port, event.rendezvous_host, event.reports};
}

std::string nodes(const ElasticOptions& options) {
  return "--nnodes " + std::to_string(options.min_nodes) + ":" + std::to_string(options.max_nodes);
}

// When round 0 forms, for a range of nodes: a job that waits out the last
// call must not look stuck, so the wait says what it waits for.
std::string firstRoundRule(const ElasticOptions& options) {
  if (options.min_nodes >= options.max_nodes) {
    return "";
  }
  return ": it forms when " + std::to_string(options.max_nodes) +
         " nodes have joined, or last_call_timeout (" + describeSeconds(options.last_call_timeout) +
         ") after the " + std::to_string(options.min_nodes) +
         " needed have (--rdzv-conf last_call_timeout=<s>)";
}

bool isLast(EventType type) {
  return type == EventType::kClosed || type == EventType::kLeft || type == EventType::kError;
}

}  // namespace

void ElasticMembership::readEvents() {
  for (;;) {
    std::int64_t session = 0;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return stopping_ || closed_ || (connected_ && !lost_); });
      if (stopping_ || closed_) {
        return;
      }
      session = session_;
    }
    if (readSession(session) != StreamEnd::kLost) {
      return;
    }
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return stopping_ || closed_ || session_ != session; });
  }
}

// Reads one session's events until its last one, this membership stops, or
// the connection is lost.
ElasticMembership::StreamEnd ElasticMembership::readSession(std::int64_t session) {
  try {
    rdzv::StoreClient events(options_.host, options_.port, keepAliveBound());
    {
      std::lock_guard lock(mutex_);
      if (stopping_ || session_ != session) {
        return stopping_ ? StreamEnd::kStopping : StreamEnd::kLost;
      }
      events_ = &events;
    }
    events.setTimeout(std::chrono::duration_cast<std::chrono::milliseconds>(kEventWait));
    for (std::int64_t n = 0;; ++n) {
      const std::string key = protocol::eventKey(options_.run_id, options_.agent_id, session, n);
      {
        std::lock_guard lock(mutex_);
        awaited_event_ = key;  // read before the previous event's waiters wake
      }
      const protocol::Event event = protocol::decodeEvent(events.get(key));
      if (event.type == EventType::kDropped) {
        return onDropped();
      }
      const bool round_over = recordEvent(event, session, n + 1);
      if (round_over) {
        notifyChange(event.type == EventType::kClosed ? kAborted : event.round);
      }
      if (isLast(event.type)) {
        std::lock_guard lock(mutex_);
        events_ = nullptr;
        return StreamEnd::kFinal;
      }
    }
  } catch (const StoreError& error) {
    std::lock_guard lock(mutex_);
    events_ = nullptr;
    error_ = "the rendezvous sent a bad event: " + proto::visible(error.what());
    closed_ = true;
    changed_.notify_all();
    return StreamEnd::kFinal;
  } catch (const Error& error) {
    std::lock_guard lock(mutex_);
    events_ = nullptr;
    if (stopping_) {
      return StreamEnd::kStopping;
    }
    if (session_ == session) {
      markLost(error.what());
    }
    return StreamEnd::kLost;
  }
}

// The rendezvous dropped this agent: no heartbeat reached it in time (a
// network outage longer than the keep-alive bound, or one that TCP's
// retransmission backoff stretched past it). The agent still runs, so its
// round is over and it joins again, as a newcomer, like a node that was
// restarted; a job that ended meanwhile answers that join with "closed".
// The lease thread does the joining (recover()).
ElasticMembership::StreamEnd ElasticMembership::onDropped() {
  std::int64_t running = -1;
  {
    std::lock_guard lock(mutex_);
    events_ = nullptr;
    dropped_ = true;
    running = returned_;
    markLost(
        "the rendezvous dropped this node: no heartbeat reached it within keep_alive_interval x "
        "keep_alive_max_attempt");
  }
  if (running >= 0) {
    notifyChange(running + 1);
  }
  return StreamEnd::kLost;
}

void ElasticMembership::notifyChange(std::int64_t newer_round) {
  {
    std::lock_guard lock(mutex_);
    over_round_ = std::max(over_round_, newer_round);
  }
  changed_.notify_all();  // roundStands() waits for this too
  // Under notify_mutex_, so onChange({}) returning means no call runs.
  std::lock_guard callback_lock(notify_mutex_);
  if (notify_) {
    notify_(newer_round);
  }
}

// The lease thread acknowledges what was read, where the rendezvous takes it.
// mutex_ held.
void ElasticMembership::noteRead(std::int64_t session, std::int64_t read,
                                 const protocol::Event& event) {
  if (event.type == EventType::kRound && event.acks && acks_.session != session) {
    acks_ = {session, 0, 0};
  }
  if (acks_.session == session) {
    acks_.read = read;
    changed_.notify_all();
  }
}

// Records one event, the `read`-th of `session`; returns whether the agent's
// running round is over.
bool ElasticMembership::recordEvent(const protocol::Event& event, std::int64_t session,
                                    std::int64_t read) {
  bool quarantine_over = false;
  std::unique_lock lock(mutex_);
  awaited_event_.clear();  // read: roundStands() may decide now
  noteRead(session, read, event);
  switch (event.type) {
    case EventType::kRound:
      latest_ = roundFrom(event);
      spare_ = false;
      suspended_ = false;
      dropped_ = false;
      quarantine_.reset();
      left_out_ = false;
      break;
    case EventType::kSuspended:
      suspended_ = true;
      break;
    case EventType::kSpare:
      spare_ = true;
      quarantine_over = quarantine_ && !event.quarantine;
      if (event.quarantine) {
        quarantine_.emplace(*event.quarantine, Clock::now());
        left_out_ = true;
      } else {
        quarantine_.reset();
      }
      break;
    case EventType::kClosed:
    case EventType::kLeft:
      closed_ = true;
      failed_on_ = event.failed_on;
      if (failed_on_) {
        *failed_on_ = proto::visible(*failed_on_);
      }
      break;
    case EventType::kDropped:
      break;  // never recorded: onDropped()
    case EventType::kFinished:
      finished_ = event.round == returned_;
      break;
    case EventType::kError:
      error_ = proto::visible(event.message);
      closed_ = true;
      break;
  }
  // The first answer to a join that was taken (a round, or word that there
  // is none yet) starts the measurement of the clock on the lease: a join
  // the daemon refuses is never measured, so its refusal is what is read.
  const bool taken = event.type == EventType::kRound || event.type == EventType::kSuspended ||
                     event.type == EventType::kSpare;
  if (taken && clock_session_ != session_) {
    clock_session_ = session_;
    clock_samples_left_ = kClockSamples;
    clock_best_ = {};
  }
  // "suspended" and a plain "spare" only mean: no round to run now; a
  // quarantine takes a member out of its round. A plain close does not stop
  // workers that are running: it comes first from the agent that finished
  // first, while the others finish too.
  const bool quarantined = event.type == EventType::kSpare && event.quarantine;
  const bool over =
      returned_ >= 0 && (event.type == EventType::kRound || event.type == EventType::kSuspended ||
                         quarantined || failed_on_);
  lock.unlock();
  changed_.notify_all();
  if (quarantined) {
    sayQuarantined(*event.quarantine);
  } else if (quarantine_over) {
    log().info("this host's quarantine is over; it stands by as a spare until a place is free");
  }
  return over;
}

// What nextRound() waits for, as the rendezvous last said.
std::string ElasticMembership::waitingFor() {
  std::lock_guard lock(mutex_);
  const std::string where = "rendezvous '" + options_.run_id + "' at " + endpoint();
  if (lost_) {
    return "the rendezvous at " + endpoint() + " to serve again (lost: " + *lost_ + ")";
  }
  if (quarantine_) {
    return "the end of this host's quarantine in " + where + " (" + quarantineLeft() +
           " left), standing by as a spare";
  }
  if (spare_) {
    return "a place in " + where + ": the round is full (" + nodes(options_) +
           "), so this node stands by as a spare";
  }
  if (suspended_) {
    return "nodes to rejoin " + where + ": the round fell below " + nodes(options_);
  }
  if (returned_ >= 0) {
    return "the next round of " + where + " (" + nodes(options_) + ")";
  }
  return "round 0 of " + where + " (" + nodes(options_) + ")" + firstRoundRule(options_);
}

std::string ElasticMembership::timeoutMessage() const {
  return "rendezvous '" + options_.run_id + "' at " + endpoint() +
         ": no round formed within join_timeout (" + describeSeconds(options_.join_timeout) +
         "): fewer than " + std::to_string(options_.min_nodes) + " nodes joined";
}

std::optional<ElasticRound> ElasticMembership::nextRound() {
  auto deadline = Clock::now() + options_.join_timeout;
  WaitNotice notice([this] { return waitingFor(); }, deadline);
  std::unique_lock lock(mutex_);
  for (;;) {
    if (cancelled_) {
      return std::nullopt;
    }
    if (!error_.empty()) {
      throw Error("rendezvous '" + options_.run_id + "' at " + endpoint() + ": " + error_);
    }
    if (latest_ && latest_->round > returned_) {
      returned_ = latest_->round;
      returned_at_ = Clock::now();
      running_ = latest_;
      return latest_;
    }
    if (closed_) {
      return std::nullopt;
    }
    if (spare_ || lost_) {
      // torchrun: no timeout as a spare; and an outage has the lease
      // thread's own deadline.
      deadline = Clock::now() + options_.join_timeout;
      if (notice.expired()) {
        notice = WaitNotice([this] { return waitingFor(); }, deadline);  // keep saying so
      }
    } else if (Clock::now() >= deadline) {
      throw TimeoutError(timeoutMessage());
    }
    lock.unlock();
    notice.tick();
    lock.lock();
    const auto slice = std::min<std::chrono::milliseconds>(
        notice.next(),
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()) +
            std::chrono::milliseconds(1));
    changed_.wait_for(lock, slice, [this] {
      return cancelled_ || closed_ || !error_.empty() || (latest_ && latest_->round > returned_);
    });
  }
}

bool ElasticMembership::roundStands(bool restart_asked) {
  std::unique_lock lock(mutex_);
  const auto over = [this, restart_asked] {
    const bool member_lost = returned_ >= 0 && member_lost_round_ == returned_;
    return member_lost ||
           (!restart_asked && (over_round_ > returned_ || (latest_ && latest_->round > returned_) ||
                               checked_round_ > returned_));
  };
  const std::uint64_t ticket = ++checks_asked_;
  changed_.notify_all();
  // A heartbeat's own bound, and a little for the lease thread to get to it.
  const auto bound = keepAliveBound() + std::chrono::seconds(1);
  const auto deadline = Clock::now() + bound;
  changed_.wait_until(lock, deadline, [&] {
    return over() || cancelled_ || stopping_ || closed_ || checks_answered_ >= ticket;
  });
  // The daemon holds an event the reader has not read yet: let it read it.
  changed_.wait_until(lock, deadline, [&] {
    return over() || cancelled_ || stopping_ || closed_ || pending_event_.empty() ||
           pending_event_ != awaited_event_;
  });
  return !over();
}

void ElasticMembership::cancelWait() {
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
  }
  changed_.notify_all();
}

void ElasticMembership::onChange(std::function<void(std::int64_t)> notify) {
  std::lock_guard lock(notify_mutex_);
  notify_ = std::move(notify);
}

bool ElasticMembership::dropped() {
  std::lock_guard lock(mutex_);
  return dropped_;
}

std::optional<std::string> ElasticMembership::failedOn() {
  std::lock_guard lock(mutex_);
  return failed_on_;
}

bool ElasticMembership::wasMember() {
  std::lock_guard lock(mutex_);
  return returned_ >= 0;
}

std::string ElasticMembership::error() {
  std::lock_guard lock(mutex_);
  return error_;
}

ElasticMembership::Finish ElasticMembership::finish(std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock(mutex_);
    done_sent_ = true;  // a rejoin after an outage says so too
  }
  enqueue(protocol::Verb::kDone, options_.agent_id);
  WaitNotice notice(
      [this] {
        return "the other nodes of rendezvous '" + options_.run_id +
               "' to finish (the exit barrier)";
      },
      Clock::now() + timeout);
  std::unique_lock lock(mutex_);
  const auto settled = [this] {
    return finished_ || closed_ || dropped_ || !error_.empty() ||
           (latest_ && latest_->round > returned_);
  };
  while (!settled() && !notice.expired()) {
    changed_.wait_for(lock, notice.next(), settled);
    lock.unlock();
    notice.tick();
    lock.lock();
  }
  if (finished_) {
    return Finish::kAllDone;
  }
  if (latest_ && latest_->round > returned_) {
    return Finish::kRoundMoved;
  }
  if (dropped_) {
    return Finish::kDropped;  // its round went on without it: it cannot be counted
  }
  if (!error_.empty()) {
    return Finish::kLost;
  }
  return closed_ ? Finish::kClosed : Finish::kTimedOut;
}

}  // namespace ddprun::launcher
