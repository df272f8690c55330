#include "ddprun/launcher/observe/timeline_merge.hpp"

#include <cmath>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>

#include "ddprun/launcher/config/worker_environment.hpp"
#include "ddprun/launcher/observe/timeline_worker_events.hpp"
#include "ddprun/proto/json_text.hpp"

namespace ddprun::launcher::timeline {
namespace {

using json = TraceEvent;

struct ClockMark {
  double ts = 0;
  double offset_us = 0;
  double uncertainty_us = 0;
  std::string reference;
};

// What the merger needs to know of one agent's file.
struct NodeFacts {
  std::string host;
  std::string run_id;
  std::optional<int> node_rank;
  double start_ts = 0;                  // of "agent start"
  std::optional<double> wall_clock_us;  // the wall clock at start_ts
  std::vector<ClockMark> clocks;        // in the order written, which is time order
  double last_ts = 0;
};

bool named(const json& event, std::string_view name) {
  return event["name"].get<std::string>() == name;
}

std::optional<double> numberArg(const json& event, const char* key) {
  if (!event.contains("args") || !event["args"].is_object() || !event["args"].contains(key) ||
      !event["args"][key].is_number()) {
    return std::nullopt;
  }
  return event["args"][key].get<double>();
}

std::string stringArg(const json& event, const char* key, std::string fallback) {
  if (!event.contains("args") || !event["args"].is_object() || !event["args"].contains(key) ||
      !event["args"][key].is_string()) {
    return fallback;
  }
  return event["args"][key].get<std::string>();
}

NodeFacts readNodeFacts(const NodeTrace& node) {
  NodeFacts agent;
  bool started = false;
  for (const json& event : node.trace.events) {
    const double ts = event["ts"].get<double>();
    agent.last_ts = std::max(agent.last_ts, ts);
    // Only the agent writes its own track: a worker's reported events (on
    // their own tracks) named like these must not move the node's clock.
    const bool agents_own = event["tid"] == kAgentTrack;
    if (agents_own && named(event, kAgentStart) && !started) {
      started = true;
      agent.start_ts = ts;
      agent.host = stringArg(event, "host", "?");
      agent.wall_clock_us = numberArg(event, "wall_clock_unix_us");
      agent.run_id = stringArg(event, "run_id", "(none)");
    } else if (agents_own && named(event, kClockOffset)) {
      const auto offset = numberArg(event, "clock_offset_us");
      const auto uncertainty = numberArg(event, "clock_uncertainty_us");
      if (offset && uncertainty) {
        agent.clocks.push_back({ts, *offset, *uncertainty, stringArg(event, "clock", "")});
      }
    } else if (!agent.node_rank && event["ph"] == "B" && event["tid"] == kRoundsTrack) {
      if (const auto rank = numberArg(event, "node_rank")) {
        agent.node_rank = static_cast<int>(*rank);
      }
    }
  }
  if (!started) {
    throw TraceError(node.file + ": no \"" + std::string(kAgentStart) +
                     "\" event: not the timeline of a ddprun agent");
  }
  return agent;
}

// The offset that holds at `ts`: the last measured at or before it, else
// the first.
double offsetAt(const NodeFacts& agent, double ts) {
  double offset = agent.clocks.front().offset_us;
  for (const ClockMark& mark : agent.clocks) {
    if (mark.ts > ts) {
      break;
    }
    offset = mark.offset_us;
  }
  return offset;
}

// "<file> (run <id>), ..." when the files are of more than one run; "" when
// of one.
std::string mixedRuns(const std::vector<NodeTrace>& nodes, const std::vector<NodeFacts>& agents) {
  bool mixed = false;
  std::string list;
  for (std::size_t i = 0; i < agents.size(); ++i) {
    mixed = mixed || agents[i].run_id != agents.front().run_id;
    list += (i == 0 ? "" : ", ") + nodes[i].file + " (run " + agents[i].run_id + ")";
  }
  return mixed ? list : "";
}

// Why the files cannot share the rendezvous' clock; "" when they can.
std::string whyNotOneClock(const std::vector<NodeTrace>& nodes,
                           const std::vector<NodeFacts>& agents, const std::string& mixed_runs) {
  if (!mixed_runs.empty()) {
    return "the files are of different runs: " + mixed_runs;
  }
  for (std::size_t i = 0; i < agents.size(); ++i) {
    if (agents[i].clocks.empty()) {
      return nodes[i].file +
             " has no clock offset (an etcd rendezvous measures none; an agent killed before "
             "joining has none)";
    }
    if (agents[i].clocks.front().reference != agents.front().clocks.front().reference) {
      return nodes[i].file + " measured its clock against " + agents[i].clocks.front().reference +
             ", " + nodes.front().file + " against " + agents.front().clocks.front().reference;
    }
  }
  return "";
}

std::string signedMicroseconds(double value) {
  std::ostringstream text;
  text << std::showpos << std::fixed << std::setprecision(1) << value << " us";
  return text.str();
}

std::string processName(const NodeFacts& agent) {
  return agent.node_rank ? agent.host + ", node rank " + std::to_string(*agent.node_rank)
                         : agent.host + " (never in a round)";
}

json metadata(const char* name, int pid, json args) {
  return {{"name", name}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", 0}, {"args", args}};
}

}  // namespace

namespace {

// A worker slice still open at the end of a trace cut short.
struct OpenWorker {
  int local_rank = 0;
  int rank = 0;
  int round = 0;
};

std::vector<OpenWorker> openWorkers(const TraceFile& trace) {
  std::map<int, std::optional<OpenWorker>> by_track;
  for (const json& event : trace.events) {
    const int tid = event["tid"].get<int>();
    if (tid < workerTrack(0) || (tid - workerTrack(0)) % 2 != 0) {
      continue;  // not a worker's own track
    }
    if (event["ph"] == "B") {
      by_track[tid] = OpenWorker{static_cast<int>(numberArg(event, "local_rank").value_or(-1)),
                                 static_cast<int>(numberArg(event, "rank").value_or(-1)),
                                 static_cast<int>(numberArg(event, "round").value_or(-1))};
    } else if (event["ph"] == "E") {
      by_track[tid].reset();
    }
  }
  std::vector<OpenWorker> open;
  for (const auto& [tid, worker] : by_track) {
    if (worker && worker->local_rank >= 0 && worker->round >= 0) {
      open.push_back(*worker);
    }
  }
  return open;
}

}  // namespace

void addUnfoldedWorkerEvents(NodeTrace& node) {
  if (node.trace.closed || node.trace.events.empty()) {
    return;
  }
  const int pid = node.trace.events.front()["pid"].get<int>();
  const std::filesystem::path dir =
      std::filesystem::path(node.file).parent_path() / kWorkerEventsDir;
  for (const OpenWorker& worker : openWorkers(node.trace)) {
    const std::filesystem::path file = timelineEventsFile(dir, worker.round, worker.local_rank);
    WorkerEventsRead read = readWorkerEvents(file);
    if (const std::string left_out = whatWasLeftOut(read); !left_out.empty()) {
      node.left_out.push_back(file.string() + ": " + left_out);
    }
    for (json& event : reportedTraceEvents(std::move(read.events), pid, worker.local_rank,
                                           worker.rank, worker.round)) {
      node.trace.events.push_back(std::move(event));
      ++node.reported_late;
    }
  }
}

MergedTrace mergeTraces(const std::vector<NodeTrace>& nodes, MixedRuns mixed) {
  std::vector<NodeFacts> agents;
  agents.reserve(nodes.size());
  for (const NodeTrace& node : nodes) {
    agents.push_back(readNodeFacts(node));
  }
  const std::string mixed_runs = mixedRuns(nodes, agents);
  if (!mixed_runs.empty() && mixed == MixedRuns::kRefuse) {
    throw MixedRunsError("the files are of different runs: " + mixed_runs +
                         "; --mixed-runs merges them anyway, on the hosts' wall clocks");
  }
  const std::string why_not = whyNotOneClock(nodes, agents, mixed_runs);
  MergedTrace merged;
  if (why_not.empty()) {
    merged.notes.push_back("on the rendezvous' clock (" + agents.front().clocks.front().reference +
                           "), from the offsets each agent measured");
  } else {
    merged.notes.push_back("on the hosts' wall clocks, which may disagree: " + why_not);
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeFacts& agent = agents[i];
    const int pid = static_cast<int>(i) + 1;
    std::function<double(double)> shift;
    if (why_not.empty()) {
      shift = [&agent](double ts) { return ts + offsetAt(agent, ts); };
      const ClockMark& first = agent.clocks.front();
      merged.notes.push_back(nodes[i].file + ": " + processName(agent) + ", clock offset " +
                             signedMicroseconds(first.offset_us) + " +- " +
                             signedMicroseconds(first.uncertainty_us).substr(1));
    } else {
      if (!agent.wall_clock_us) {
        throw TraceError(nodes[i].file + ": its \"" + std::string(kAgentStart) +
                         "\" event has no wall_clock_unix_us, and " + why_not);
      }
      const double to_wall = *agent.wall_clock_us - agent.start_ts;
      shift = [to_wall](double ts) { return ts + to_wall; };
      merged.notes.push_back(nodes[i].file + ": " + processName(agent) +
                             ", placed by its wall clock");
    }
    merged.events.push_back(metadata("process_name", pid, {{"name", processName(agent)}}));
    merged.events.push_back(metadata("process_sort_index", pid, {{"sort_index", pid}}));
    for (json event : nodes[i].trace.events) {
      if (event["ph"] == "M" && named(event, "process_name")) {
        continue;  // named above, for the job
      }
      event["pid"] = pid;
      event["ts"] = std::llround(shift(event["ts"].get<double>()));
      merged.events.push_back(std::move(event));
    }
    if (!nodes[i].trace.closed) {
      json end = traceEvent("timeline ends: the agent was killed or is still running", 'i',
                            std::llround(shift(agent.last_ts)), pid, kAgentTrack);
      end["s"] = "t";
      merged.events.push_back(std::move(end));
      merged.notes.push_back(nodes[i].file +
                             ": cut short (no closing ']': the agent was killed or is still "
                             "running); read up to its last whole event" +
                             (nodes[i].reported_late > 0
                                  ? ", with " + std::to_string(nodes[i].reported_late) +
                                        " event(s) its running workers had reported"
                                  : std::string()));
    }
    merged.notes.insert(merged.notes.end(), nodes[i].left_out.begin(), nodes[i].left_out.end());
  }
  return merged;
}

std::string formatTrace(const std::vector<json>& events) {
  std::string text = "[";
  for (std::size_t i = 0; i < events.size(); ++i) {
    text += i == 0 ? "\n" : ",\n";
    text += proto::jsonText(events[i]);
  }
  text += "\n]\n";
  return text;
}

}  // namespace ddprun::launcher::timeline
