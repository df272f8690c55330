#include "echo_floor_framing.hpp"

#include <cstring>

#include "ddprun/proto/tcpstore_wire.hpp"

namespace ddprun::bench {
namespace {

namespace proto = ddprun::proto;

// The raw load's requests are under 200 bytes; anything this large is not it.
constexpr std::size_t kMaxRequestBytes = 64 * 1024;

// Reads one request's fields in wire order, after its command byte; each
// read is false when the input ends before the field does.
class FieldReader {
 public:
  explicit FieldReader(std::string_view input) : input_(input) {}

  bool number(std::uint64_t& out) {
    if (input_.size() - at_ < sizeof(out)) {
      return false;
    }
    std::memcpy(&out, input_.data() + at_, sizeof(out));
    at_ += sizeof(out);
    return true;
  }

  // A key or a value: a u64 length, then the bytes.
  bool bytes(std::string_view& out) {
    std::uint64_t length = 0;
    if (!number(length) || input_.size() - at_ < length) {
      return false;
    }
    out = input_.substr(at_, length);
    at_ += length;
    return true;
  }

  // A key list (u64 count, then the keys), read past.
  bool keyList() {
    std::uint64_t count = 0;
    std::string_view key;
    if (!number(count)) {
      return false;
    }
    for (; count > 0; --count) {
      if (!bytes(key)) {
        return false;
      }
    }
    return true;
  }

  std::size_t used() const { return at_; }

 private:
  std::string_view input_;
  std::size_t at_ = 1;
};

enum class Framed { Complete, Incomplete, Unknown };

void appendNumber(std::string& reply, std::uint64_t value) {
  reply.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// Frames the request at the front of `input` (not empty); once it is
// complete, appends its reply and sets `used` to its size. Nothing changes
// before then.
Framed answerOne(std::string_view input, EchoConnection& connection, std::string& reply,
                 std::size_t& used) {
  using Byte = proto::Legacy113Byte;
  FieldReader fields(input);
  std::string_view key, value;
  std::uint64_t delta = 0;
  switch (static_cast<Byte>(static_cast<std::uint8_t>(input.front()))) {
    case Byte::Set:  // no reply
      if (!fields.bytes(key) || !fields.bytes(value)) {
        return Framed::Incomplete;
      }
      connection.last_value.assign(value);
      break;
    case Byte::Get:  // u64 length, then the value
      if (!fields.bytes(key)) {
        return Framed::Incomplete;
      }
      appendNumber(reply, connection.last_value.size());
      reply += connection.last_value;
      break;
    case Byte::Add:  // the new total, an i64 (wrapping, as two's complement adds)
      if (!fields.bytes(key) || !fields.number(delta)) {
        return Framed::Incomplete;
      }
      connection.added += delta;
      appendNumber(reply, connection.added);
      break;
    case Byte::Check:  // one byte
      if (!fields.keyList()) {
        return Framed::Incomplete;
      }
      reply.push_back(static_cast<char>(proto::CheckResponse::Ready));
      break;
    case Byte::Wait:  // one byte, at once: every key exists as far as the floor knows
      if (!fields.keyList()) {
        return Framed::Incomplete;
      }
      reply.push_back(static_cast<char>(proto::WaitResponse::StopWaiting));
      break;
    default:
      return Framed::Unknown;
  }
  used = fields.used();
  return Framed::Complete;
}

}  // namespace

const char* answerArrived(std::string_view arrived, EchoConnection& connection,
                          std::string& reply) {
  // The usual case, whole requests in one read, is framed where it was read.
  std::string_view input = arrived;
  if (!connection.partial.empty()) {
    connection.partial.append(arrived);
    input = connection.partial;
  }
  std::size_t done = 0;
  while (done < input.size()) {
    std::size_t used = 0;
    const Framed framed = answerOne(input.substr(done), connection, reply, used);
    if (framed == Framed::Unknown) {
      return "a command the raw load never sends";
    }
    if (framed == Framed::Incomplete) {
      break;
    }
    done += used;
  }
  if (input.size() - done > kMaxRequestBytes) {
    return "a request of more than 64 KiB";
  }
  if (connection.partial.empty()) {
    connection.partial.assign(input.substr(done));
  } else {
    connection.partial.erase(0, done);
  }
  return nullptr;
}

}  // namespace ddprun::bench
