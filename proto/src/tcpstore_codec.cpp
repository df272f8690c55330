// The request decoder. A request is read field by field, and each list item
// on its own; a walk stopped by a short input keeps where it got
// (RequestDecoder::Progress) and resumes there when more bytes arrive, so
// decoding costs O(request size) however the bytes are split. The walk that
// finds a resumed request complete stored nothing; one more pass over the
// now whole request collects its fields (views into the caller's buffer,
// which may have moved in the meantime).
#include "ddprun/proto/tcpstore_codec.hpp"

#include <bit>
#include <cstring>
#include <stdexcept>

#include "tcpstore_layout.hpp"

namespace ddprun::proto {

static_assert(std::endian::native == std::endian::little,
              "TCPStore sends host-order integers; ddprun assumes a little-endian host");

namespace {

using layout::Field;
using Progress = RequestDecoder::Progress;

// Reads primitives from a position in a buffer. The first failure sticks:
// either the input is short (need_ says how many bytes the request needs at
// least) or it breaks a limit (error_ says which).
class Reader {
 public:
  // `input` starts at the command byte; reading starts at `position`.
  Reader(std::string_view input, const Limits& limits, std::size_t position)
      : in_(input), limits_(limits), pos_(position) {}

  bool ok() const { return !short_ && error_.empty(); }
  std::size_t position() const { return pos_; }
  std::uint64_t fieldsRead() const { return fields_read_; }

  // Bytes the request needs at least after the item being read: the length
  // prefixes of a list's remaining items. Counted in the checks against the
  // request limit and in NeedMore hints, so that a connection reads a long
  // list in a few large reads, not one item per read.
  void reserve(std::uint64_t bytes) { reserved_ = bytes; }

  template <typename T>
  bool fixed(T& value) {
    ++fields_read_;
    if (!need(sizeof(T))) {
      return false;
    }
    std::memcpy(&value, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool key(std::string_view& out) { return sized(out, limits_.max_key_bytes, "key"); }
  bool value(std::string_view& out) { return sized(out, limits_.max_value_bytes, "value"); }

  // A u64 count of items each at least `min_item_bytes` long; true once
  // those minimal bytes are all buffered.
  bool count(std::size_t& out, std::size_t min_item_bytes) {
    std::uint64_t n = 0;
    if (!fixed(n)) {
      return false;
    }
    if (n > limits_.max_keys_per_request) {
      return fail("a request naming " + std::to_string(n) + " keys, over the limit of " +
                  std::to_string(limits_.max_keys_per_request) + " keys");
    }
    out = static_cast<std::size_t>(n);
    // Check that the items can fit before the caller reserves room for them
    // (n is at most max_keys_per_request, but that limit may be huge).
    if (out > (limits_.max_request_bytes - pos_) / min_item_bytes) {
      return tooLarge(limits_.max_request_bytes);
    }
    return need(out * min_item_bytes);
  }

  // NeedMore or Bad, once a read has failed.
  DecodeResult failure() const {
    if (!error_.empty()) {
      return {DecodeStatus::Bad, 0, error_};
    }
    return {DecodeStatus::NeedMore, need_, {}};
  }

 private:
  bool sized(std::string_view& out, std::size_t limit, const char* what) {
    std::uint64_t len = 0;
    if (!fixed(len)) {
      return false;
    }
    if (len > limit) {
      return fail(std::string("a ") + what + " of " + std::to_string(len) + " bytes, over the " +
                  std::to_string(limit) + "-byte limit");
    }
    if (!need(len)) {
      return false;
    }
    out = in_.substr(pos_, static_cast<std::size_t>(len));
    pos_ += static_cast<std::size_t>(len);
    return true;
  }

  // True if `n` more bytes are buffered; otherwise records the shortfall.
  bool need(std::uint64_t n) {
    if (!ok()) {
      return false;
    }
    // pos_ <= max_request_bytes always holds, so these cannot wrap around.
    const std::uint64_t room = limits_.max_request_bytes - pos_;
    if (n > room) {
      return tooLarge(n);
    }
    if (reserved_ > room - n) {
      return tooLarge(n + reserved_);
    }
    const std::size_t total = pos_ + static_cast<std::size_t>(n);
    if (total > in_.size()) {
      short_ = true;
      need_ = total + static_cast<std::size_t>(reserved_);
      return false;
    }
    return true;
  }

  bool tooLarge(std::uint64_t more) {
    const std::string size = more > limits_.max_request_bytes
                                 ? "more than " + std::to_string(limits_.max_request_bytes)
                                 : "at least " + std::to_string(pos_ + more);
    return fail("a request of " + size + " bytes, over the " +
                std::to_string(limits_.max_request_bytes) + "-byte request limit");
  }

  bool fail(std::string error) {
    error_ = std::move(error);
    return false;
  }

  std::string_view in_;
  const Limits& limits_;
  std::size_t pos_;
  std::uint64_t reserved_ = 0;
  std::uint64_t fields_read_ = 0;
  bool short_ = false;
  std::size_t need_ = 0;
  std::string error_;
};

// Reads a KeyList (or, with `pairs`, a Pairs) field from `at` on, moving `at`
// past the count and past each whole item.
bool readList(Reader& reader, bool pairs, Progress& at, Request* out) {
  const std::size_t item_bytes = (pairs ? 2 : 1) * sizeof(std::uint64_t);
  if (!at.counted) {
    std::size_t n = 0;
    if (!reader.count(n, item_bytes)) {
      return false;
    }
    if (out != nullptr) {
      out->keys.reserve(n);
      out->values.reserve(pairs ? n : 0);
    }
    at.counted = true;
    at.items_left = n;
    at.position = reader.position();
  }
  for (; at.items_left > 0; --at.items_left) {
    const std::uint64_t after_item = (at.items_left - 1) * item_bytes;
    std::string_view key;
    std::string_view value;
    reader.reserve(after_item + (pairs ? sizeof(std::uint64_t) : 0));
    if (!reader.key(key)) {
      return false;
    }
    reader.reserve(after_item);
    if (pairs && !reader.value(value)) {
      return false;
    }
    if (out != nullptr) {
      out->keys.push_back(key);
      if (pairs) {
        out->values.push_back(value);
      }
    }
    at.position = reader.position();
  }
  reader.reserve(0);
  return true;
}

// Reads one field at `at`, moving `at` past what it read whole.
bool readField(Reader& reader, Field field, Progress& at, Request* out) {
  std::uint32_t word = 0;
  std::int64_t number = 0;
  std::string_view text;
  switch (field) {
    case Field::U32:
      if (!reader.fixed(word)) {
        return false;
      }
      if (out != nullptr) {
        out->word = word;
      }
      break;
    case Field::I64:
      if (!reader.fixed(number)) {
        return false;
      }
      if (out != nullptr) {
        out->number = number;
      }
      break;
    case Field::Key:
    case Field::Value:
      if (!(field == Field::Key ? reader.key(text) : reader.value(text))) {
        return false;
      }
      if (out != nullptr) {
        (field == Field::Key ? out->keys : out->values).push_back(text);
      }
      break;
    case Field::KeyList:
    case Field::Pairs:
      return readList(reader, field == Field::Pairs, at, out);
  }
  at.position = reader.position();
  return true;
}

// Reads the fields of `command` from `at` on, collecting them into `out`
// when given. False when stopped (see Reader::failure).
bool walk(Reader& reader, Command command, Progress& at, Request* out) {
  const layout::Layout& fields = layout::of(command);
  for (; at.field < fields.count; ++at.field, at.counted = false) {
    if (!readField(reader, fields.fields[at.field], at, out)) {
      return false;
    }
  }
  return true;
}

std::string hexByte(std::uint8_t byte) {
  static constexpr char kDigits[] = "0123456789abcdef";
  return std::string("0x") + kDigits[byte >> 4] + kDigits[byte & 0xF];
}

}  // namespace

void Request::clear() {
  keys.clear();
  values.clear();
  number = 0;
  word = 0;
}

RequestDecoder::RequestDecoder(Limits limits, Dialect legacy_dialect)
    : limits_(limits), legacy_dialect_(legacy_dialect) {
  if (legacy_dialect != Dialect::Legacy113 && legacy_dialect != Dialect::Legacy21) {
    throw std::invalid_argument("the legacy dialect must be 1.13 or 2.1");
  }
  if (limits.max_request_bytes < 16) {
    throw std::invalid_argument("the request limit must be at least 16 bytes");
  }
}

DecodeResult RequestDecoder::detectDialect(std::string_view input) {
  if (input.empty()) {
    return {DecodeStatus::NeedMore, 1, {}};
  }
  if (input[0] != 0) {
    dialect_ = legacy_dialect_;
    return {};
  }
  // A legacy SET is at least 9 bytes, so waiting for 5 can never stall it.
  if (input.size() < 5) {
    return {DecodeStatus::NeedMore, 5, {}};
  }
  std::uint32_t magic = 0;
  std::memcpy(&magic, input.data() + 1, sizeof(magic));
  dialect_ = magic == kValidateMagic ? Dialect::Modern : legacy_dialect_;
  return {};
}

DecodeResult RequestDecoder::decode(std::string_view input, Request& out) {
  if (dialect_ == Dialect::Undecided) {
    DecodeResult detected = detectDialect(input);
    if (dialect_ == Dialect::Undecided) {
      return detected;
    }
  }
  if (input.empty()) {
    return {DecodeStatus::NeedMore, 1, {}};
  }
  if (progress_.under_way && input.size() >= progress_.position &&
      input[0] == static_cast<char>(progress_.command_byte)) {
    return resume(input, out);
  }
  progress_ = {};
  const auto byte = static_cast<std::uint8_t>(input[0]);
  const auto command = commandFromWire(dialect_, byte);
  if (!command) {
    return {DecodeStatus::Bad, 0,
            "unknown command byte " + hexByte(byte) + " for a " +
                std::string(dialectName(dialect_)) + " client"};
  }
  if (*command == Command::Validate && !first_request_) {
    return {DecodeStatus::Bad, 0, "a second VALIDATE (valid only as a connection's first request)"};
  }
  out.clear();
  out.command = *command;
  progress_.command = *command;
  progress_.command_byte = byte;
  Reader reader(input, limits_, progress_.position);
  const bool whole = walk(reader, *command, progress_, &out);
  fields_read_ += reader.fieldsRead();
  return whole ? complete(reader.position()) : stopped(reader.failure());
}

// The rest of a request the last call found incomplete, from where it
// stopped; nothing is collected until the whole request is here.
DecodeResult RequestDecoder::resume(std::string_view input, Request& out) {
  Reader reader(input, limits_, progress_.position);
  const bool whole = walk(reader, progress_.command, progress_, nullptr);
  fields_read_ += reader.fieldsRead();
  if (!whole) {
    return stopped(reader.failure());
  }
  out.clear();
  out.command = progress_.command;
  Progress from_start;
  Reader collector(input, limits_, from_start.position);
  const bool collected = walk(collector, progress_.command, from_start, &out);
  fields_read_ += collector.fieldsRead();
  if (!collected) {  // only if the caller changed bytes it had passed before
    progress_ = {};
    return collector.failure();
  }
  return complete(collector.position());
}

DecodeResult RequestDecoder::complete(std::size_t size) {
  // A wrong magic never reaches here: detection reads it as a legacy request.
  first_request_ = false;
  progress_ = {};
  return {DecodeStatus::Complete, size, {}};
}

DecodeResult RequestDecoder::stopped(DecodeResult result) {
  progress_.under_way = result.status == DecodeStatus::NeedMore;
  return result;
}

}  // namespace ddprun::proto
