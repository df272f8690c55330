// ElasticMembership's lease thread: the connection that joined is this
// agent's lease, and only this thread uses it after join(). It sends the
// queued requests in order and a heartbeat every keep_alive_interval, each
// answered (a PING rides with it), so a rendezvous that falls silent is
// noticed within the keep-alive bound, as the rendezvous would lose this
// agent (beat() says what happens then). When
// the rendezvous is lost (here, or by the reader), it reconnects and joins
// again: a rejoin of the running round when a ddprund served it, a fresh
// join when the agent that hosted it is gone.
//
// Exception boundaries: every network call here is caught; a failure is the
// loss of the rendezvous, never an exception out of the thread.
#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/launcher/rendezvous/elastic_membership.hpp"
#include "ddprun/launcher/rendezvous/wait_notice.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/rendezvous_status.hpp"
#include "endpoint_address.hpp"
#include "store_connection.hpp"

namespace ddprun::launcher {
namespace {

namespace protocol = proto::rendezvous;
using protocol::Verb;

}  // namespace

ElasticMembership::ElasticMembership(ElasticOptions options) : options_(std::move(options)) {}

ElasticMembership::~ElasticMembership() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  halted_ = true;
  changed_.notify_all();
  if (lease_thread_.joinable()) {
    lease_thread_.join();  // it leaves the run first if the run is still open
  }
  {
    std::lock_guard lock(mutex_);
    if (events_ != nullptr) {
      events_->interrupt();
    }
  }
  if (reader_.joinable()) {
    reader_.join();
  }
}

std::string ElasticMembership::endpoint() const {
  return formatEndpoint(options_.host, options_.port);
}

std::chrono::milliseconds ElasticMembership::keepAliveBound() const {
  return options_.keep_alive_interval * options_.keep_alive_max_attempt;
}

bool ElasticMembership::join() {
  WaitNotice notice(
      [this] {
        return "the rendezvous at " + endpoint() + " (rendezvous '" + options_.run_id +
               "'; an agent that hosts it, or ddprund, must serve it there)";
      },
      Clock::now() + options_.join_timeout);
  std::unique_ptr<rdzv::StoreClient> lease;
  try {
    lease = connectToStore(options_.host, options_.port, notice, cancelled_);
  } catch (const TimeoutError& error) {
    throw TimeoutError("rendezvous '" + options_.run_id + "': nothing served it at " + endpoint() +
                       " within join_timeout (" + describeSeconds(options_.join_timeout) +
                       "): " + error.what());
  }
  if (!lease || cancelled_) {
    return false;  // a cancel that came while connecting: do not join at all
  }
  lease->setTimeout(keepAliveBound());
  sendJoin(*lease, joinRequest(*lease, /*rejoin=*/false));  // refused: nextRound() says why
  {
    std::lock_guard lock(mutex_);
    connected_ = true;
  }
  lease_ = std::move(lease);
  lease_thread_ = std::thread([this] { runLease(); });
  reader_ = std::thread([this] { readEvents(); });
  return true;
}

// This agent's join: its session (one more than the last), the newest
// round it ran, and, for a rejoin, its place in that round.
protocol::JoinRequest ElasticMembership::joinRequest(const rdzv::StoreClient& lease, bool rejoin) {
  protocol::JoinRequest request;
  request.agent = options_.agent_id;
  request.local_world_size = options_.local_world_size;
  request.node_rank = options_.node_rank_hint;
  request.min_nodes = options_.min_nodes;
  request.max_nodes = options_.max_nodes;
  request.last_call_timeout = options_.last_call_timeout;
  request.keep_alive_timeout = keepAliveBound();
  request.quarantine_after = options_.quarantine_after;
  request.quarantine_duration = options_.quarantine_duration;
  request.store_host = options_.local_addr.empty()
                           ? advertisedStoreHost(options_.host, lease.localAddress())
                           : options_.local_addr;
  request.store_port = options_.store_port;
  std::lock_guard lock(mutex_);
  request.session = session_;
  request.last_round = returned_;
  request.max_restarts = options_.max_restarts;
  request.restarts_used = restarts_used_;
  // A quarantined agent's round went on without it: it has no place to
  // come back to, and joins as what it is now, a spare.
  if (rejoin && running_ && !left_out_) {
    request.rejoin = protocol::Rejoin{running_->round, running_->group_rank,
                                      running_->group_world_size, done_sent_};
  }
  return request;
}

// With a token, the join first asks for a nonce and carries the proof that
// this agent holds the token for it; the token itself never leaves. The
// nonce and the join's answer are read on the lease, plain GETs answered to
// this connection alone (nothing is stored where another client could
// forge or plant it); an older daemon answers the join with nothing.
bool ElasticMembership::sendJoin(rdzv::StoreClient& lease, protocol::JoinRequest request) {
  if (!options_.token.empty()) {
    lease.set(protocol::verbKey(options_.run_id, Verb::kChallenge),
              protocol::challengeRequest(options_.agent_id, request.session));
    const std::string nonce =
        lease.query(protocol::challengeKey(options_.run_id, options_.agent_id, request.session));
    request.auth = protocol::joinProof(options_.token, options_.run_id, options_.agent_id,
                                       request.session, nonce);
  }
  const std::string join_key = protocol::verbKey(options_.run_id, Verb::kJoin);
  lease.set(join_key, protocol::encodeJoin(request));
  std::string answer;
  try {
    answer = lease.query(join_key);
  } catch (const Error&) {
    return true;  // the lease closed or fell silent: lost, as any lease is (runLease)
  }
  if (answer.empty()) {
    return true;
  }
  const protocol::Event refusal = protocol::decodeEvent(answer);
  std::lock_guard lock(mutex_);
  error_ = refusal.message.empty() ? "the rendezvous refused this agent's join" : refusal.message;
  closed_ = true;
  changed_.notify_all();
  return false;
}

void ElasticMembership::runLease() {
  std::unique_ptr<rdzv::StoreClient> lease = std::move(lease_);
  while (lease && !serveLease(*lease)) {
    {
      std::lock_guard lock(mutex_);
      if (closed_) {
        return;  // the run is over (or refused this agent): nothing to go back to
      }
    }
    lease = recover();
  }
}

// Serves the connection until this membership stops (true) or the
// rendezvous is lost (false). Once a join has been taken (the reader arms
// it), the clock is measured, one sample per turn after the queued
// requests, so that none of them waits for it.
bool ElasticMembership::serveLease(rdzv::StoreClient& lease) {
  auto next_beat = Clock::now() + options_.keep_alive_interval;
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait_until(lock, next_beat, [this] { return leaseHasWork(); });
    if (lost_) {
      return false;  // the reader saw it first
    }
    try {
      sendQueuedRequests(lease, lock);
      ackIfDue(lease, lock);
      if (stopping_) {
        leaveUnlessClosed(lease, lock);
        return true;
      }
      sampleClockIfDue(lease, lock);
      beatIfDue(lease, lock, next_beat);
    } catch (const Error& error) {
      if (!lock.owns_lock()) {
        lock.lock();
      }
      if (stopping_) {
        return true;
      }
      markLost(error.what());
      return false;
    }
  }
}

bool ElasticMembership::leaseHasWork() const {
  return stopping_ || lost_ || !requests_.empty() || checks_asked_ > checks_answered_ ||
         (clock_samples_left_ > 0 && !closed_) || ackDue();
}

// Only in the session whose round said the rendezvous takes acks: after a
// rejoin, the rendezvous may be an older one.
bool ElasticMembership::ackDue() const {
  return acks_.session == session_ && acks_.read > acks_.acked;
}

// The events read so far are the rendezvous' to drop: one ack covers them.
void ElasticMembership::ackIfDue(rdzv::StoreClient& lease, std::unique_lock<std::mutex>& lock) {
  if (!ackDue()) {
    return;
  }
  const protocol::EventAck ack{options_.agent_id, acks_.session, acks_.read};
  lock.unlock();
  lease.set(protocol::verbKey(options_.run_id, Verb::kAck), protocol::encodeEventAck(ack));
  lock.lock();
  if (acks_.session == ack.session) {
    acks_.acked = std::max(acks_.acked, ack.read);
  }
}

// In the order queued, each one dequeued only once sent.
void ElasticMembership::sendQueuedRequests(rdzv::StoreClient& lease,
                                           std::unique_lock<std::mutex>& lock) {
  while (!requests_.empty()) {
    const auto [verb, value] = requests_.front();
    lock.unlock();
    lease.set(protocol::verbKey(options_.run_id, verb), value);
    lock.lock();
    requests_.pop_front();
    ++requests_sent_;
    changed_.notify_all();
  }
}

// Returns with the lock released when it left.
void ElasticMembership::leaveUnlessClosed(rdzv::StoreClient& lease,
                                          std::unique_lock<std::mutex>& lock) {
  if (!closed_) {
    lock.unlock();
    lease.set(protocol::verbKey(options_.run_id, Verb::kLeave), options_.agent_id);
  }
}

void ElasticMembership::sampleClockIfDue(rdzv::StoreClient& lease,
                                         std::unique_lock<std::mutex>& lock) {
  if (clock_samples_left_ > 0 && !closed_) {
    lock.unlock();
    takeClockSample(lease);
    lock.lock();
  }
}

// Requests do not put the heartbeat off: a job whose rounds end faster than
// the interval would never send one, and be dropped. roundStands() asks for
// one now: its answer proves the rendezvous still serves (or loses it, and
// the round with it).
void ElasticMembership::beatIfDue(rdzv::StoreClient& lease, std::unique_lock<std::mutex>& lock,
                                  Clock::time_point& next_beat) {
  const std::uint64_t asked = checks_asked_;
  if ((Clock::now() >= next_beat || asked > checks_answered_) && !closed_) {
    const bool checking = asked > checks_answered_;
    const std::string awaited = checking ? awaited_event_ : std::string();
    lock.unlock();
    beat(lease);
    const bool held = !awaited.empty() && lease.check({awaited});
    const std::optional<protocol::JobStatus> status =
        checking ? runningStatus(lease) : std::nullopt;
    lock.lock();
    next_beat = Clock::now() + options_.keep_alive_interval;
    pending_event_ = held ? awaited : std::string();
    if (status) {
      checked_round_ = std::max(checked_round_, status->round);
      noteMemberLosses(*status);
    }
  }
  if (asked > checks_answered_) {
    checks_answered_ = asked;
    changed_.notify_all();
  }
}

// One heartbeat, with a PING behind it. An agent that hosts the rendezvous
// and falls silent is lost at the keep-alive bound (its workers are gone or
// cut off too). A ddprund that falls silent (stopped, its link cut) is waited
// for on this same connection, up to join_timeout, while the workers go on:
// a new connection would close this one, and to a daemon that only stalled a
// closed lease is a lost agent, and a new round for all. Only a connection
// that breaks, or a silence that long, is the daemon's loss.
std::optional<protocol::JobStatus> ElasticMembership::runningStatus(rdzv::StoreClient& lease) {
  try {
    const std::string answer =
        lease.query(protocol::queryKey(protocol::statusQuestion(options_.run_id)));
    return protocol::decodeJobStatus(answer);
  } catch (const TimeoutError&) {
    throw;  // the rendezvous stopped answering: the caller's loss handling
  } catch (const std::exception& error) {
    log().debug("the rendezvous could not say its round: {}", error.what());
    return std::nullopt;
  }
}

// A member lost from the running round after this agent was told it: its
// workers' deaths reset this node's. (One lost while the round still formed
// was never in it, though the round has its number.) The daemon read every
// closed connection of the run before it answered
// (RendezvousService::loseHungUpAgents). mutex_ held.
void ElasticMembership::noteMemberLosses(const protocol::JobStatus& status) {
  const auto now = Clock::now();
  for (const protocol::LossStatus& loss : status.losses) {
    const auto lost_at = now - std::chrono::milliseconds(loss.ago_ms);
    if (loss.was_member && loss.round == returned_ && loss.agent != options_.agent_id &&
        lost_at >= returned_at_) {
      member_lost_round_ = returned_;
    }
  }
}

void ElasticMembership::beat(rdzv::StoreClient& lease) {
  lease.set(protocol::verbKey(options_.run_id, Verb::kHeartbeat), options_.agent_id);
  lease.sendPing();
  try {
    lease.awaitPing(keepAliveBound());
    return;
  } catch (const TimeoutError& error) {
    if (hostedByAnotherAgent()) {
      throw;
    }
    log().warn(
        "the rendezvous daemon at {} is silent ({}); the workers go on; waiting for it on this "
        "connection for up to join_timeout ({})",
        endpoint(), error.what(), describeSeconds(options_.join_timeout));
  }
  const auto silent_since = Clock::now() - keepAliveBound();
  const auto deadline = Clock::now() + options_.join_timeout;
  while (Clock::now() < deadline) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_ || lost_) {
        throw NetworkError("stopped waiting for the silent rendezvous daemon at " + endpoint());
      }
    }
    try {
      lease.awaitPing(keepAliveBound());
      log().info("the rendezvous daemon at {} answers again after {} of silence", endpoint(),
                 describeSeconds(std::chrono::duration_cast<std::chrono::milliseconds>(
                     Clock::now() - silent_since)));
      return;
    } catch (const TimeoutError&) {
      // still silent
    }
  }
  throw TimeoutError("the rendezvous daemon at " + endpoint() + " was silent for join_timeout");
}

// One sample of the measurement in progress; the last one tells the
// watcher. A daemon that does not tell its clock ends the measurement.
void ElasticMembership::takeClockSample(rdzv::StoreClient& lease) {
  const std::optional<ClockSample> sample = sampleClock(lease);
  std::optional<ClockOffset> measured;
  {
    std::lock_guard lock(mutex_);
    if (!sample) {
      clock_samples_left_ = 0;
      return;
    }
    clock_best_.offer(*sample);
    if (--clock_samples_left_ == 0) {
      measured = clock_best_.offset("c10d rendezvous at " + endpoint());
    }
  }
  if (measured) {
    clock_watch_.measured(*measured);
  }
}

bool ElasticMembership::hostedByAnotherAgent() {
  std::lock_guard lock(mutex_);
  return running_ && !running_->rendezvous_host.empty() &&
         running_->rendezvous_host != options_.agent_id;
}

// With mutex_ held: the rendezvous is gone; the reader's connection is cut
// so it stops waiting on it.
void ElasticMembership::markLost(const std::string& why) {
  if (!lost_) {
    lost_ = why;
    connected_ = false;
    if (events_ != nullptr) {
      events_->interrupt();
    }
  }
  changed_.notify_all();
}

// Reaches the rendezvous again, up to join_timeout. nullptr: it never came
// back (error_ says so) or this membership stops.
std::unique_ptr<rdzv::StoreClient> ElasticMembership::recover() {
  std::string why;
  std::string host;
  std::int64_t newer_round = 0;
  bool dropped = false;
  {
    std::lock_guard lock(mutex_);
    why = lost_.value_or("the connection dropped");
    dropped = dropped_;
    if (running_ && !running_->rendezvous_host.empty() &&
        running_->rendezvous_host != options_.agent_id) {
      host = running_->rendezvous_host;
    }
    newer_round = returned_ + 1;
  }
  const std::string wait = describeSeconds(options_.join_timeout);
  if (dropped) {
    host.clear();  // the rendezvous is there; this agent is out of its round
    log().warn(
        "the rendezvous at {} dropped this node: no heartbeat reached it within "
        "keep_alive_interval x keep_alive_max_attempt (a network problem?); this node's workers "
        "stop, and it joins the job again",
        endpoint());
  } else if (!host.empty()) {
    log().error(
        "lost the rendezvous hosted by {} at {} ({}): that agent is gone, and its workers with "
        "it; stopping this node's workers and waiting up to join_timeout ({}) for the rendezvous "
        "to serve again",
        host, endpoint(), why, wait);
    {
      std::lock_guard lock(mutex_);
      member_lost_round_ = newer_round - 1;  // the host was a member: a failure now is its loss
    }
    notifyChange(newer_round);  // the running round is over
  } else {
    log().warn(
        "lost the rendezvous daemon at {} ({}); the workers go on; reconnecting for up to "
        "join_timeout ({})",
        endpoint(), why, wait);
  }
  const auto deadline = Clock::now() + options_.join_timeout;
  WaitNotice notice(
      [this, why] {
        return "the rendezvous at " + endpoint() + " to serve again (lost: " + why + ")";
      },
      deadline);
  while (Clock::now() < deadline) {
    std::unique_ptr<rdzv::StoreClient> lease;
    try {
      lease = connectToStore(options_.host, options_.port, notice, halted_, options_.try_host);
      if (!lease) {
        return nullptr;
      }
      lease->setTimeout(keepAliveBound());
      {
        std::lock_guard lock(mutex_);
        ++session_;
      }
      const protocol::JoinRequest request =
          joinRequest(*lease, /*rejoin=*/host.empty() && !dropped);
      if (!sendJoin(*lease, request)) {
        return nullptr;  // refused (error_ says why): nothing to rejoin
      }
      {
        std::lock_guard lock(mutex_);
        lost_.reset();
        connected_ = true;
      }
      changed_.notify_all();
      log().info("reconnected to the rendezvous at {}{}", endpoint(),
                 request.rejoin ? "; rejoined round " + std::to_string(request.rejoin->round) +
                                      " with the workers still running"
                                : "; joining a new round");
      return lease;
    } catch (const TimeoutError&) {
      break;  // connectToStore's deadline is ours
    } catch (const Error& error) {
      why = error.what();  // served, then lost again: keep trying until the deadline
      notice.tick();
    }
  }
  std::lock_guard lock(mutex_);
  error_ = "lost the rendezvous at " + endpoint() + " (" + why +
           ") and nothing served it again within join_timeout (" + wait + ")";
  closed_ = true;
  changed_.notify_all();
  return nullptr;
}

void ElasticMembership::enqueue(Verb verb, std::string value) {
  std::lock_guard lock(mutex_);
  requests_.emplace_back(verb, std::move(value));
  ++requests_queued_;
  changed_.notify_all();
}

// An older rendezvous refuses a value that is not the agent's id (and
// closes the lease): a report goes only where the round said it is taken.
std::string ElasticMembership::reportValue(
    const std::optional<protocol::WorkerFailureReport>& failure) {
  if (!running_ || !running_->reports) {
    return options_.agent_id;
  }
  return protocol::encodeAgentReport({options_.agent_id, restarts_used_, failure});
}

// Waits until every request queued so far has gone out; false after
// `timeout`, or when the rendezvous is gone for good.
bool ElasticMembership::drained(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const std::size_t target = requests_queued_;
  return changed_.wait_for(lock, timeout, [&] {
    return requests_sent_ >= target || !error_.empty() || stopping_;
  }) && requests_sent_ >= target;
}

void ElasticMembership::requestRestart(const protocol::WorkerFailureReport& failure) {
  std::string value;
  {
    std::lock_guard lock(mutex_);
    ++restarts_used_;
    value = reportValue(failure);
  }
  enqueue(Verb::kRestart, std::move(value));
}

void ElasticMembership::storeReady() { enqueue(Verb::kStoreReady, options_.agent_id); }

bool ElasticMembership::close(bool failed,
                              const std::optional<protocol::WorkerFailureReport>& cause) {
  std::string value = options_.agent_id;
  if (failed) {
    std::lock_guard lock(mutex_);
    value = reportValue(cause);
  }
  enqueue(failed ? Verb::kAbort : Verb::kClose, std::move(value));
  if (!drained(keepAliveBound())) {
    log().warn("could not tell the rendezvous at {} that the job {}", endpoint(),
               failed ? "failed here" : "is over");
    return false;
  }
  return true;
}

}  // namespace ddprun::launcher
