// This agent's membership in an elastic (c10d) rendezvous decided by a
// ddprund (or an agent that embeds one): it joins, announcing the workers'
// store it serves, learns each round (its ranks and node 0's store) the
// moment the daemon pushes it, keeps itself alive, and survives losing the
// rendezvous. The wire is the contract in
// proto/include/ddprun/proto/rendezvous_protocol.hpp.
//
// Losing the rendezvous is noticed at once when a connection to it drops,
// and within keep_alive_interval x keep_alive_max_attempt when it falls
// silent (a heartbeat is answered or it is lost). Then:
//  - its host was another agent (it embedded the rendezvous and died with
//    its workers): the running round is over (the change callback says so),
//    and this agent joins afresh once the endpoint serves again, hosting it
//    itself if it can bind it (try_host);
//  - it was a ddprund: the workers go on; this agent reconnects and rejoins
//    its round, which the restarted daemon restores once every member is
//    back (no restart), or re-forms without the ones that are not.
// Either way, if nothing serves the endpoint again within join_timeout, the
// membership ends with an error.
//
// The lease thread also measures this agent's clock against the daemon's
// (clock_sync.hpp) once each join has been taken (the first round, spare or
// suspension event of its session), between its other requests, so the
// measurement never holds up a round; watchClock() hears of it.
//
// Threads: join() and nextRound() run on the agent's waiter thread;
// requestRestart() on the agent's loop; finish() and close() on main's after
// it; cancelWait() on any. After join(), two threads of its own: the lease
// thread owns the connection that joined (every request, heartbeats, and the
// reconnection), so callers only queue requests and never block on the
// network; the reader thread blocks in a GET for the next event on a second
// connection. Both hand what they learn over under mutex_ and a condition
// variable, and the reader calls the change callback, so a membership change
// reaches the agent without polling. Destruction leaves the rendezvous and
// joins both threads.
#pragma once

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ddprun/launcher/core/rendezvous.hpp"
#include "ddprun/launcher/rendezvous/clock_sync.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/proto/rendezvous_status.hpp"
#include "ddprun/rendezvous/client.hpp"

namespace ddprun::launcher {

struct ElasticOptions {
  std::string host;  // the rendezvous endpoint
  std::uint16_t port = 29400;
  std::string run_id;
  std::string agent_id;  // unique per agent process
  int local_world_size = 1;
  std::optional<int> node_rank_hint;
  int min_nodes = 1;
  int max_nodes = 1;
  std::chrono::milliseconds join_timeout{600'000};
  std::chrono::milliseconds last_call_timeout{30'000};
  std::chrono::milliseconds keep_alive_interval{5'000};
  int keep_alive_max_attempt = 3;
  // The workers' store this agent serves: its address is local_addr, or the
  // address this host reaches the rendezvous from.
  std::string local_addr;
  std::uint16_t store_port = 0;
  // Called before each attempt to reach a lost rendezvous: hosts it here if
  // this agent may and can (on the lease thread). Unset: never.
  std::function<void()> try_host;
  // The job's rendezvous token: every join proves it (challenge and HMAC).
  std::string token;
  // --max-restarts, told to the rendezvous with every join (ddprun status).
  int max_restarts = 0;
  // --rdzv-conf quarantine_after and quarantine_seconds: the run's settings
  // when this agent's join is the run's first.
  int quarantine_after = 3;
  std::chrono::milliseconds quarantine_duration{600'000};
};

// One round, as this node takes part in it.
struct ElasticRound {
  std::int64_t round = 0;  // every node's TORCHELASTIC_RESTART_COUNT
  int group_rank = 0;
  int group_world_size = 1;
  int base_rank = 0;  // global rank of local rank 0
  int world_size = 1;
  std::string store_host;  // node 0's workers' store
  std::uint16_t store_port = 0;
  std::string rendezvous_host;  // the agent that serves the rendezvous ("": a ddprund)
  bool reports = false;         // it takes restart and abort values as reports
};

class ElasticMembership {
 public:
  // No I/O: join() connects.
  explicit ElasticMembership(ElasticOptions options);
  ~ElasticMembership();
  ElasticMembership(const ElasticMembership&) = delete;
  ElasticMembership& operator=(const ElasticMembership&) = delete;

  // Connects (the rendezvous may come up later: it keeps trying until
  // join_timeout, saying so) and joins. false: cancelWait() came first.
  // Throws TimeoutError naming the endpoint.
  bool join();

  // Blocks until a round newer than the last one returned, saying what it
  // waits for. nullopt: the run was closed (the job ended elsewhere) or the
  // wait cancelled. Throws TimeoutError after join_timeout without one
  // (a spare waits as long as the round is full), and Error if the daemon
  // refused the join or was lost for good.
  std::optional<ElasticRound> nextRound();

  // Called on a membership thread whenever the round returned last is over
  // (a new round, a suspension below min_nodes, the loss of the agent that
  // hosted the rendezvous, or an abort: kAborted). A plain close is not a
  // change: the running workers finish, and the next nextRound() returns
  // nullopt. An empty function unregisters; once that returns, no call runs.
  void onChange(std::function<void(std::int64_t newer_round)> notify);
  static constexpr std::int64_t kAborted = INT64_MAX;
  // The agent whose failure ended the job, once the run was aborted. Like
  // error(), the rendezvous' text as proto::visible() shows it: ready for a
  // log line or a terminal.
  std::optional<std::string> failedOn();
  // Whether the daemon dropped this agent (no heartbeat reached it in time)
  // and it has not been in a round since.
  bool dropped();
  // Whether this agent ever took part in a round (a spare never did).
  bool wasMember();
  // Whether the rendezvous quarantined this host and has not given this
  // agent a round since (it stands by, or stood by until the job ended).
  bool leftOutByQuarantine();
  // `told` hears of each quarantine of this host (on the reader thread);
  // an empty function unregisters, and once that returns no call runs.
  void watchQuarantine(std::function<void(const QuarantineNotice&)> told);

  // Makes a join() or nextRound() blocked in another thread return. Any thread.
  void cancelWait();

  // This node's workers failed (`failure` first): the whole job moves to a
  // new round, a restart this agent counts. Queued.
  void requestRestart(const proto::rendezvous::WorkerFailureReport& failure);
  // This node's workers failed: whether the failure stands, that is, no
  // other member was lost from the round nextRound() returned last and,
  // unless `restart_asked` (this agent's own request moves the round), the
  // round still stands. The lease thread sends a heartbeat and waits
  // for its answer, so a rendezvous whose host died is lost by then (its
  // connection reset, or silent for the keep-alive bound) and the round is
  // over: false. The same turn asks the daemon whether it already holds the
  // event the reader waits for (a new round pushed, not yet read off the
  // other connection); if so, the answer waits for the reader. Blocks at
  // most about the keep-alive bound; cancelWait() ends it (true: nothing
  // more is known).
  bool roundStands(bool restart_asked = false);
  // This node is node 0 of the round nextRound() returned and has emptied its
  // workers' store: the other members may be told the round. Queued.
  void storeReady();
  // After this node's workers succeeded: reports it and waits until every
  // node of the round has (the exit barrier), so the workers' store and a
  // daemon this agent hosts stay up for them. The daemon pushes the outcome;
  // nothing polls. kLost: the rendezvous was lost and never came back.
  enum class Finish { kAllDone, kRoundMoved, kDropped, kClosed, kLost, kTimedOut };
  Finish finish(std::chrono::milliseconds timeout);
  // The job is over: every agent is told. `failed`: restarts are spent
  // here (`cause`: the root cause, when a worker failed), and every other
  // agent stops its workers too. Waits (briefly) until the request has gone
  // out; false when it did not.
  bool close(bool failed,
             const std::optional<proto::rendezvous::WorkerFailureReport>& cause = std::nullopt);

  // `measured` hears of each measurement of this agent's clock against the
  // daemon's (ClockWatch: on the lease thread, or at once for the last one).
  void watchClock(ClockWatch::Callback measured) { clock_watch_.watch(std::move(measured)); }

  // "host:port" of the rendezvous, for messages.
  std::string endpoint() const;
  // Why the membership ended with an error, if it did; what the rendezvous
  // said in it is shown by proto::visible().
  std::string error();

 private:
  using Clock = std::chrono::steady_clock;

  // Lease thread (elastic_lease.cpp).
  void runLease();
  bool serveLease(rdzv::StoreClient& lease);
  // serveLease()'s turn in steps. leaseHasWork(): its wait's condition. The
  // others are called with mutex_ held by `lock`, release it while they talk
  // to the rendezvous and take it back before they return, except
  // leaveUnlessClosed() (the last step) and any that throws.
  bool leaseHasWork() const;
  void sendQueuedRequests(rdzv::StoreClient& lease, std::unique_lock<std::mutex>& lock);
  void leaveUnlessClosed(rdzv::StoreClient& lease, std::unique_lock<std::mutex>& lock);
  void sampleClockIfDue(rdzv::StoreClient& lease, std::unique_lock<std::mutex>& lock);
  void ackIfDue(rdzv::StoreClient& lease, std::unique_lock<std::mutex>& lock);
  bool ackDue() const;
  void beatIfDue(rdzv::StoreClient& lease, std::unique_lock<std::mutex>& lock,
                 Clock::time_point& next_beat);
  void beat(rdzv::StoreClient& lease);
  // The run's round as the rendezvous answers its status question now; -1
  // when it cannot say (an older daemon, a bad answer).
  std::optional<proto::rendezvous::JobStatus> runningStatus(rdzv::StoreClient& lease);
  void noteMemberLosses(const proto::rendezvous::JobStatus& status);
  void takeClockSample(rdzv::StoreClient& lease);
  bool hostedByAnotherAgent();
  std::unique_ptr<rdzv::StoreClient> recover();
  proto::rendezvous::JoinRequest joinRequest(const rdzv::StoreClient& lease, bool rejoin);
  // Sends the join and reads its answer on the lease: true when it was
  // taken; refused, the refusal is this membership's error and it is closed.
  bool sendJoin(rdzv::StoreClient& lease, proto::rendezvous::JoinRequest request);
  std::chrono::milliseconds keepAliveBound() const;
  void enqueue(proto::rendezvous::Verb verb, std::string value);
  // A restart's or an abort's value: a report with the failure where the
  // rendezvous takes one, else the agent's id alone. mutex_ held.
  std::string reportValue(const std::optional<proto::rendezvous::WorkerFailureReport>& failure);
  bool drained(std::chrono::milliseconds timeout);
  void markLost(const std::string& why);

  // Reader thread and the rounds (elastic_membership.cpp).
  enum class StreamEnd { kFinal, kLost, kStopping };
  void readEvents();
  StreamEnd readSession(std::int64_t session);
  StreamEnd onDropped();
  bool recordEvent(const proto::rendezvous::Event& event, std::int64_t session, std::int64_t read);
  // The reader has read `read` events of `session`, `event` the last.
  // mutex_ held.
  void noteRead(std::int64_t session, std::int64_t read, const proto::rendezvous::Event& event);
  // Quarantine (quarantine_notice.cpp). quarantineLeft(): mutex_ held.
  void sayQuarantined(const proto::rendezvous::HostQuarantine& quarantine);
  std::string quarantineLeft() const;
  void notifyChange(std::int64_t newer_round);
  std::string waitingFor();
  std::string timeoutMessage() const;

  ElasticOptions options_;
  std::unique_ptr<rdzv::StoreClient>
      lease_;                           // joined on the waiter thread, then the lease thread's
  std::atomic<bool> cancelled_{false};  // join(): stop trying
  std::atomic<bool> halted_{false};     // destruction: the lease thread stops reconnecting

  std::mutex mutex_;
  std::condition_variable changed_;
  // The connection to the rendezvous.
  bool connected_ = false;
  std::int64_t session_ = 0;             // this agent's join count; events are per session
  std::optional<std::string> lost_;      // why the rendezvous is gone, while it is
  rdzv::StoreClient* events_ = nullptr;  // the reader's connection, to interrupt it
  std::deque<std::pair<proto::rendezvous::Verb, std::string>> requests_;  // to send, in order
  std::size_t requests_sent_ = 0;
  std::size_t requests_queued_ = 0;
  bool done_sent_ = false;  // this node's workers succeeded (rejoins say so)
  int restarts_used_ = 0;   // restarts this agent asked for (its counted restarts)
  // The rounds.
  std::optional<ElasticRound> latest_;   // the newest round pushed
  std::int64_t returned_ = -1;           // the round nextRound() returned last
  Clock::time_point returned_at_;        // when it did
  std::optional<ElasticRound> running_;  // the round nextRound() returned last, whole
  std::int64_t over_round_ = -1;         // the newest round the change callback was told of
  std::uint64_t checks_asked_ = 0;       // roundStands() calls; each wants a heartbeat answered
  std::uint64_t checks_answered_ = 0;
  std::string awaited_event_;  // the key of the event the reader waits for ("": none)
  std::string pending_event_;  // an awaited event the daemon already holds (a check saw it)
  // The run's round as the rendezvous last answered a check (-1: not asked,
  // or no answer). A member's event of a newer round is held until node 0
  // has emptied its store: this says the round moved on before that event.
  std::int64_t checked_round_ = -1;
  // The running round, once a member was lost from it: a check's answer
  // listed one, or the agent that hosted the rendezvous was lost.
  std::int64_t member_lost_round_ = -1;
  bool spare_ = false;  // the round is full: standing by
  // This host is quarantined: why, and when this agent was told (by its
  // own clock). `left_out_`: no round since a quarantine was told.
  std::optional<std::pair<proto::rendezvous::HostQuarantine, Clock::time_point>> quarantine_;
  bool left_out_ = false;
  bool suspended_ = false;  // the round fell below min_nodes
  bool finished_ = false;   // the daemon said every member of the round is done
  bool closed_ = false;
  bool stopping_ = false;
  std::string error_;
  std::optional<std::string> failed_on_;
  bool dropped_ = false;
  // The events read, and acknowledged to the rendezvous (the ack verb), in
  // the one session whose round said the rendezvous takes acks: an older
  // rendezvous would close the lease on the verb.
  struct EventAcks {
    std::int64_t session = -1;  // -1: no round of any session said so yet
    std::int64_t read = 0;
    std::int64_t acked = 0;
  };
  EventAcks acks_;
  // The clock measurement, once per session, when its join was taken:
  // samples still to take on the lease.
  std::int64_t clock_session_ = -1;
  int clock_samples_left_ = 0;
  BestClockSample clock_best_;
  ClockWatch clock_watch_;   // its callback runs without mutex_ held
  std::mutex notify_mutex_;  // held while notify_ runs; never together with mutex_
  std::function<void(std::int64_t)> notify_;
  std::mutex quarantine_watch_mutex_;  // held while it runs; never together with mutex_
  std::function<void(const QuarantineNotice&)> quarantine_watch_;

  std::thread lease_thread_;
  std::thread reader_;
};

}  // namespace ddprun::launcher
