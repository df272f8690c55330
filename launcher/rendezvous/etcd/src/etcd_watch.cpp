// Watch: one streaming POST /v3/watch, read on the thread that calls run().
#include <nlohmann/json.hpp>

#include "ddprun/launcher/etcd/etcd_client.hpp"
#include "ddprun/proto/json_parse.hpp"
#include "etcd_http.hpp"

namespace ddprun::launcher::etcd {
namespace {

using nlohmann::json;

// Cuts a byte stream into its top-level JSON objects. The gateway's chunks
// need not end where its objects do, and nlohmann::json cannot parse the
// first value of an unfinished text, hence this small hand-written scanner:
// it tracks brace depth outside of strings.
class JsonObjectSplitter {
 public:
  void append(std::string_view bytes) { pending_.append(bytes); }

  // The next complete object, if one has arrived.
  std::optional<std::string> next() {
    for (; scanned_ < pending_.size(); ++scanned_) {
      const char c = pending_[scanned_];
      if (in_string_) {
        if (escaped_) {
          escaped_ = false;
        } else if (c == '\\') {
          escaped_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '{') {
        ++depth_;
      } else if (c == '}' && depth_ > 0 && --depth_ == 0) {
        std::string object = pending_.substr(0, scanned_ + 1);
        pending_.erase(0, scanned_ + 1);
        scanned_ = 0;
        return object;
      }
    }
    return std::nullopt;
  }

 private:
  std::string pending_;
  std::size_t scanned_ = 0;
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

WatchEvent eventFromJson(const json& event) {
  WatchEvent result;
  result.type =
      event.value("type", "PUT") == "DELETE" ? WatchEvent::Type::kDelete : WatchEvent::Type::kPut;
  result.kv = detail::keyValueFromJson(event.value("kv", json::object()));
  return result;
}

}  // namespace

struct Watch::Stream {
  Stream(Client& client, std::size_t member_index)
      : index(member_index),
        member(client.options().members[member_index]),
        owned(client.newConnection(member_index)),
        connection(*owned) {}
  std::size_t index;  // in the client's members
  Member member;
  std::unique_ptr<detail::Connection> owned;
  detail::Connection& connection;
  JsonObjectSplitter splitter;
  bool created = false;
};

Watch::Watch(Client& client, std::string prefix, std::int64_t start_revision)
    : client_(client), prefix_(std::move(prefix)), start_revision_(start_revision) {}

Watch::~Watch() { cancel(); }

void Watch::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
  if (stream_ != nullptr) {
    stream_->connection.abort();
  }
}

std::optional<std::size_t> Watch::createdOn() {
  std::lock_guard lock(mutex_);
  return created_on_;
}

bool Watch::cancelled() {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

// The one way a stream becomes the one cancel() aborts, for the life of this
// object: run() declares it after the stream, so the stream (and the
// Connection in it, which cancel() calls) is detached before it is
// destroyed, on every way out of run(). A watch already cancelled attaches
// nothing: there is nothing to abort, and nothing left to dangle.
class Watch::Attachment {
 public:
  Attachment(Watch& watch, Stream& stream) : watch_(watch) {
    std::lock_guard lock(watch_.mutex_);
    if (!watch_.cancelled_) {
      watch_.stream_ = &stream;
      attached_ = true;
    }
  }
  ~Attachment() {
    std::lock_guard lock(watch_.mutex_);
    watch_.stream_ = nullptr;
  }
  Attachment(const Attachment&) = delete;
  Attachment& operator=(const Attachment&) = delete;

  // false: the watch was cancelled before the stream opened.
  bool attached() const { return attached_; }

 private:
  Watch& watch_;
  bool attached_ = false;
};

void Watch::run(const EventHandler& on_events,
                const std::function<void(std::int64_t revision)>& on_created) {
  on_created_ = on_created;
  const ClientOptions& options = client_.options();
  const std::string target = "/v3/watch";
  const json request{{"create_request",
                      {{"key", toBase64(prefix_)},
                       {"range_end", toBase64(detail::prefixEnd(prefix_))},
                       {"start_revision", std::to_string(start_revision_)}}}};  // 0: now
  std::vector<std::string> failures;
  const std::size_t count = options.members.size();
  for (std::size_t i = 0; i < count; ++i) {
    Stream stream(client_, (client_.currentMember() + i) % count);
    const Member& member = stream.member;
    const Attachment attachment(*this, stream);
    if (!attachment.attached()) {
      return;
    }
    try {
      // Connecting, the request and the member's "created" answer have a
      // deadline; the events after it do not (a watch is silent for long).
      const auto deadline = detail::Clock::now() + options.request_timeout;
      stream.connection.open(deadline);
      detail::HttpAnswer refused;
      refused.status =
          stream.connection.startStream(target, request.dump(), deadline, refused.body);
      const auto refusal = detail::checkAnswer(member, target, refused);
      if (refusal) {
        failures.push_back(detail::describeMember(member) + ": " + *refusal);
        continue;
      }
      while (!stream.created) {
        readOnce(stream, deadline, on_events);
      }
    } catch (const detail::MemberFailure& e) {
      if (cancelled()) {
        return;
      }
      failures.push_back(detail::describeMember(member) + ": " + e.what());
      continue;
    }
    streamEvents(stream, on_events);
    return;
  }
  throw EtcdUnavailable(detail::noMemberServed(client_.describe(), target, failures));
}

void Watch::streamEvents(Stream& stream, const EventHandler& on_events) {
  const std::string from =
      "etcd at " + detail::describeMember(stream.member) + ": the watch of '" + prefix_ + "' ";
  try {
    while (readOnce(stream, std::nullopt, on_events)) {
    }
  } catch (const detail::MemberFailure& e) {
    if (cancelled()) {
      return;
    }
    throw EtcdUnavailable(from + "broke: " + e.what());
  }
  if (cancelled()) {
    return;
  }
  throw EtcdUnavailable(from + "ended: the member closed the stream");
}

bool Watch::readOnce(Stream& stream, std::optional<std::chrono::steady_clock::time_point> deadline,
                     const EventHandler& on_events) {
  const bool more = stream.connection.readStream(
      deadline, [&stream](std::string_view bytes) { stream.splitter.append(bytes); });
  while (auto text = stream.splitter.next()) {
    if (cancelled()) {
      return false;
    }
    handleMessage(stream, *text, on_events);
  }
  return more && !cancelled();
}

void Watch::handleMessage(Stream& stream, const std::string& text, const EventHandler& on_events) {
  const std::string from = "etcd at " + detail::describeMember(stream.member);
  const json message = proto::parseJson(text);
  if (!message.is_object()) {
    throw StoreError(from + ": the watch answered bad JSON: " + text);
  }
  if (message.contains("error")) {
    const auto& error = message["error"];
    throw EtcdUnavailable(
        from + ": the watch of '" + prefix_ +
        "' failed: " + (error.is_object() ? error.value("message", error.dump()) : error.dump()));
  }
  const json result = message.value("result", json::object());
  const std::int64_t compacted = detail::int64Field(result, "compact_revision");
  if (compacted != 0) {
    throw WatchCompacted(from + ": revision " + std::to_string(start_revision_) +
                         " of the watch of '" + prefix_ + "' was compacted (the oldest left is " +
                         std::to_string(compacted) + ")");
  }
  if (result.value("canceled", false)) {
    throw EtcdUnavailable(from + ": the member cancelled the watch of '" + prefix_ +
                          "': " + result.value("cancel_reason", std::string("no reason given")));
  }
  if (result.value("created", false)) {
    stream.created = true;
    {
      std::lock_guard lock(mutex_);
      created_on_ = stream.index;
    }
    if (on_created_) {
      on_created_(detail::headerRevision(result));
    }
  }
  const auto events = result.find("events");
  if (events == result.end() || events->empty()) {
    return;  // created, or progress
  }
  std::vector<WatchEvent> batch;
  for (const auto& event : *events) {
    batch.push_back(eventFromJson(event));
  }
  on_events(batch, detail::headerRevision(result));
}

}  // namespace ddprun::launcher::etcd
