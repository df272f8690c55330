#include "ddprun/launcher/observe/status_command.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "ddprun/launcher/core/option_values.hpp"
#include "ddprun/launcher/observe/status_table.hpp"
#include "ddprun/proto/cli_args.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/json_parse.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/proto/rendezvous_status.hpp"
#include "ddprun/proto/visible_text.hpp"
#include "ddprun/rendezvous/client.hpp"

namespace ddprun::launcher {
namespace {

namespace protocol = proto::rendezvous;
using Clock = std::chrono::steady_clock;

constexpr int kC10dDefaultPort = 29400;   // torchrun's, for an endpoint without one
constexpr std::size_t kRunIdsNamed = 10;  // an unknown run id's error names this many held
constexpr const char* kUsage =
    "usage: ddprun status --rdzv-endpoint HOST[:PORT] [--rdzv-id ID] [--json] "
    "[--timeout SECONDS] [--rdzv-backend c10d]\n";

struct StatusRequest {
  Endpoint endpoint;
  std::string run_id;  // empty: the list of jobs
  bool json = false;
  std::chrono::milliseconds timeout{5000};
};

// --help was asked for: its text.
struct HelpRequested {
  std::string text;
};

// Only c10d rendezvous have something to ask; the others get one line.
void checkBackend(const std::string& backend) {
  if (backend == "c10d") {
    return;
  }
  if (backend == "static") {
    throw ConfigError(
        "--rdzv-backend static: a static rendezvous has no daemon to ask (node 0's store holds "
        "only its keys); ddprun status reads c10d rendezvous");
  }
  if (backend == "etcd" || backend == "etcd-v2" || backend == "etcd-v3") {
    throw ConfigError("--rdzv-backend " + backend +
                      ": ddprun status reads c10d rendezvous (a ddprund, or an agent that hosts "
                      "one), not the records an etcd rendezvous keeps in etcd");
  }
  failValue("--rdzv-backend", backend, "expected c10d (ddprun status reads c10d rendezvous)");
}

std::chrono::milliseconds timeoutFrom(const std::string& text) {
  const double seconds = parsePositiveDouble("--timeout", text);
  if (seconds > 1e9) {
    failValue("--timeout", text, "at most 1e9 seconds");
  }
  return std::chrono::milliseconds(std::max<long>(1, std::lround(seconds * 1000)));
}

StatusRequest parseStatusFlags(std::vector<std::string> args) {
  CLI::App app(
      "Asks a c10d rendezvous (a ddprund, or the agent that hosts one) about its jobs and\n"
      "prints them: without --rdzv-id the jobs it holds; with it, that job's round, members,\n"
      "spares, restarts, last failure and lost agents. Read-only: it never joins.",
      "ddprun status");
  app.footer(
      "Exit status: 0 the rendezvous answered; 1 it could not be asked (nothing answers at the\n"
      "endpoint, no answer within --timeout, an unknown run id, not a c10d rendezvous); 2 bad\n"
      "flags, an empty value among them (leave --rdzv-id out for the list of jobs).");
  std::string endpoint;
  std::string timeout = "5";
  std::string backend = "c10d";
  StatusRequest request;
  app.add_option("--rdzv-endpoint,--rdzv_endpoint", endpoint,
                 "The rendezvous, HOST[:PORT] (port 29400 when left out)")
      ->type_name("HOST[:PORT]")
      ->required();
  app.add_option("--rdzv-id,--rdzv_id", request.run_id, "The job's run id (default: list them)")
      ->type_name("ID");
  app.add_flag("--json", request.json, "Print the rendezvous' answer as JSON, for scripts");
  app.add_option("--timeout", timeout, "Seconds to wait for the answer (default 5)")
      ->type_name("SECONDS");
  app.add_option("--rdzv-backend,--rdzv_backend", backend, "c10d, the only one with a status")
      ->type_name("BACKEND");
  try {
    // "--rdzv-id=" is "", never the next argument, and "" means nothing here.
    args = proto::readAsArgparse(app, std::move(args));
    std::reverse(args.begin(), args.end());  // CLI11's vector overload expects reversed order
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    throw HelpRequested{app.help()};
  } catch (const CLI::ParseError& error) {
    const std::string what = error.what();
    throw ConfigError(what.substr(0, what.find('\n')));
  }
  checkBackend(backend);
  request.endpoint = parseEndpoint("--rdzv-endpoint", endpoint, kC10dDefaultPort);
  if (request.run_id.find('/') != std::string::npos) {
    failValue("--rdzv-id", request.run_id, "a run id has no '/'");
  }
  request.timeout = timeoutFrom(timeout);
  return request;
}

std::string endpointOf(const StatusRequest& request) {
  return formatEndpoint(request.endpoint.host, request.endpoint.port);
}

// Asks one question before the request's deadline; an empty answer is a
// server that stores what it is asked for, not a ddprun rendezvous.
std::string ask(rdzv::StoreClient& client, const StatusRequest& request, Clock::time_point deadline,
                const std::string& question) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  client.setTimeout(std::max(left, std::chrono::milliseconds(1)));
  std::string answer = client.query(protocol::queryKey(question));
  if (answer.empty()) {
    throw StoreError("the server at " + endpointOf(request) +
                     " speaks TCPStore but does not answer ddprun status (a ddprund older than "
                     "this ddprun, or another program's store)");
  }
  return answer;
}

// Whether node 0 of a static rendezvous of `run_id` keeps its store here.
bool holdsStaticRun(rdzv::StoreClient& client, const std::string& run_id) {
  return client.check({protocol::key(protocol::Scope::kStatic, run_id, "node/0")});
}

[[noreturn]] void failStatic(const StatusRequest& request, const std::string& run_id) {
  throw Error("the store at " + endpointOf(request) + " is node 0's of static rendezvous '" +
              run_id + "', which has no daemon to ask: ddprun status reads c10d rendezvous");
}

// What a rendezvous answered instead of its jobs. Only a question it does
// not know says it predates ddprun status' questions (an older ddprund);
// any other error is its own, reported as such.
[[noreturn]] void failJobsQuestion(const StatusRequest& request,
                                   const protocol::QueryError& error) {
  if (error.error.starts_with(protocol::kNoSuchQuestion)) {
    throw StoreError(
        "the rendezvous at " + endpointOf(request) +
        " does not answer ddprun status (a ddprund older than this ddprun?): " + error.error);
  }
  throw StoreError("the rendezvous at " + endpointOf(request) +
                   " answered with an error: " + error.error);
}

[[noreturn]] void failUnknownRun(const StatusRequest& request, const protocol::JobList& list) {
  const std::vector<protocol::JobSummary>& jobs = list.jobs;
  std::string held;
  for (std::size_t i = 0; i < jobs.size() && i < kRunIdsNamed; ++i) {
    held += (held.empty() ? "" : ", ") + jobs[i].run_id;
  }
  const auto total =
      static_cast<std::size_t>(list.total.value_or(static_cast<std::int64_t>(jobs.size())));
  if (total > kRunIdsNamed && !held.empty()) {
    held += " and " + std::to_string(total - std::min(jobs.size(), kRunIdsNamed)) + " more";
  }
  throw Error("no rendezvous '" + request.run_id + "' at " + endpointOf(request) + " (" +
              (held.empty() ? std::string("it holds none") : "it holds " + held) + ")");
}

void print(const std::string& text) { std::fputs(text.c_str(), stdout); }

// Non-ASCII as \uXXXX: the same JSON to a script, and nothing (a C1
// control, a bidi override) for a terminal to obey.
void printJson(const std::string& answer) {
  // The answer decoded already (decodeJobList, decodeJobStatus): JSON within
  // the nesting bound.
  print(proto::parseJson(answer).dump(2, ' ', /*ensure_ascii=*/true,
                                      nlohmann::json::error_handler_t::replace) +
        "\n");
}

int showJobs(rdzv::StoreClient& client, const StatusRequest& request, Clock::time_point deadline) {
  const std::string answer = ask(client, request, deadline, std::string(protocol::kQueryJobs));
  if (const auto error = protocol::decodeQueryError(answer)) {
    failJobsQuestion(request, *error);
  }
  const auto jobs = protocol::decodeJobList(answer);
  if (jobs.jobs.empty() && holdsStaticRun(client, "none")) {
    failStatic(request, "none");
  }
  request.json ? printJson(answer)
               : print(formatJobList(jobs.jobs, endpointOf(request), jobs.total));
  return 0;
}

int showJob(rdzv::StoreClient& client, const StatusRequest& request, Clock::time_point deadline) {
  const std::string answer =
      ask(client, request, deadline, protocol::statusQuestion(request.run_id));
  if (protocol::decodeQueryError(answer)) {
    if (holdsStaticRun(client, request.run_id)) {
      failStatic(request, request.run_id);
    }
    // Unknown here, or a question this rendezvous does not know: the jobs
    // question tells which, and what it holds instead.
    const std::string jobs = ask(client, request, deadline, std::string(protocol::kQueryJobs));
    if (const auto error = protocol::decodeQueryError(jobs)) {
      failJobsQuestion(request, *error);
    }
    failUnknownRun(request, protocol::decodeJobList(jobs));
  }
  const protocol::JobStatus status = protocol::decodeJobStatus(answer);
  request.json ? printJson(answer) : print(formatJobStatus(status, endpointOf(request)));
  return 0;
}

}  // namespace

int runStatusCommand(const std::vector<std::string>& args) {
  StatusRequest request;
  try {
    request = parseStatusFlags(args);
  } catch (const HelpRequested& help) {
    print(help.text);
    return 0;
  } catch (const ConfigError& error) {
    std::fprintf(stderr, "ddprun status: %s\n%s", proto::visible(error.what()).c_str(), kUsage);
    return 2;
  }
  try {
    const Clock::time_point deadline = Clock::now() + request.timeout;
    rdzv::StoreClient client(request.endpoint.host,
                             static_cast<std::uint16_t>(request.endpoint.port), request.timeout,
                             rdzv::StoreClient::Connect::kOnce);
    return request.run_id.empty() ? showJobs(client, request, deadline)
                                  : showJob(client, request, deadline);
  } catch (const std::exception& error) {  // ddprun's Errors, and json's on a bad answer
    // The one place its errors meet the terminal: they quote what the
    // rendezvous sent (run ids, its error text) and the flags as given.
    std::fprintf(stderr, "ddprun status: %s\n", proto::visible(error.what()).c_str());
    return 1;
  }
}

}  // namespace ddprun::launcher
