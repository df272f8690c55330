// Request layouts are one table shared by the decoder and the encoder, so the
// two cannot disagree about a command's fields.
#include "ddprun/proto/tcpstore_codec.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <stdexcept>

namespace ddprun::proto {

static_assert(std::endian::native == std::endian::little,
              "TCPStore sends host-order integers; ddprun assumes a little-endian host");

namespace {

enum class Field : std::uint8_t { U32, I64, Key, Value, KeyList, Pairs };

struct Layout {
  std::array<Field, 3> fields;
  std::uint8_t count;
};

// Index: Command. Fields after the command byte, in wire order.
constexpr std::array<Layout, 19> kLayouts = {{
    {{Field::U32}, 1},                              // Validate
    {{Field::Key, Field::Value}, 2},                // Set
    {{Field::Key, Field::Value, Field::Value}, 3},  // CompareSet
    {{Field::Key}, 1},                              // Get
    {{Field::Key, Field::I64}, 2},                  // Add
    {{Field::KeyList}, 1},                          // Check
    {{Field::KeyList}, 1},                          // Wait
    {{}, 0},                                        // GetNumKeys
    {{Field::Key}, 1},                              // WatchKey
    {{Field::Key}, 1},                              // DeleteKey
    {{Field::Key, Field::Value}, 2},                // Append
    {{Field::KeyList}, 1},                          // MultiGet
    {{Field::Pairs}, 1},                            // MultiSet
    {{}, 0},                                        // CancelWait
    {{Field::U32}, 1},                              // Ping
    {{Field::Key, Field::Value}, 2},                // QueuePush
    {{Field::Key}, 1},                              // QueuePop
    {{Field::Key}, 1},                              // QueueLen
    {{}, 0},                                        // List
}};

const Layout& layoutOf(Command command) { return kLayouts[static_cast<std::size_t>(command)]; }

// Reads primitives from the front of a buffer. The first failure sticks:
// either the input is short (need_ says how many bytes the request needs at
// least) or it breaks a limit (error_ says which).
class Reader {
 public:
  // `input` starts at the command byte, which the caller has already read.
  Reader(std::string_view input, const Limits& limits) : in_(input), limits_(limits), pos_(1) {}

  bool ok() const { return !short_ && error_.empty(); }
  std::size_t position() const { return pos_; }
  std::uint64_t fieldsRead() const { return fields_read_; }

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

  // A u64 count of items each at least `min_item_bytes` long.
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
    if (min_item_bytes != 0 && out > (limits_.max_request_bytes - pos_) / min_item_bytes) {
      return tooLarge(limits_.max_request_bytes);
    }
    return need(out * min_item_bytes);
  }

  DecodeResult result(std::size_t complete_size) const {
    if (!error_.empty()) {
      return {DecodeStatus::Bad, 0, error_};
    }
    if (short_) {
      return {DecodeStatus::NeedMore, need_, {}};
    }
    return {DecodeStatus::Complete, complete_size, {}};
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
    // pos_ <= max_request_bytes always holds, so this cannot wrap around.
    if (n > limits_.max_request_bytes - pos_) {
      return tooLarge(n);
    }
    const std::size_t total = pos_ + static_cast<std::size_t>(n);
    if (total > in_.size()) {
      short_ = true;
      need_ = total;
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
  std::uint64_t fields_read_ = 0;
  bool short_ = false;
  std::size_t need_ = 0;
  std::string error_;
};

// Reads one field into `out`; false stops decoding (see Reader::result).
bool readField(Reader& reader, Field field, Request& out) {
  std::string_view text;
  std::size_t n = 0;
  switch (field) {
    case Field::U32:
      return reader.fixed(out.word);
    case Field::I64:
      return reader.fixed(out.number);
    case Field::Key:
      return reader.key(text) && (out.keys.push_back(text), true);
    case Field::Value:
      return reader.value(text) && (out.values.push_back(text), true);
    case Field::KeyList:
      if (!reader.count(n, sizeof(std::uint64_t)) || !reader.ok()) {
        return false;
      }
      out.keys.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        if (!reader.key(text)) {
          return false;
        }
        out.keys.push_back(text);
      }
      return true;
    case Field::Pairs:
      if (!reader.count(n, 2 * sizeof(std::uint64_t)) || !reader.ok()) {
        return false;
      }
      out.keys.reserve(n);
      out.values.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        if (!reader.key(text)) {
          return false;
        }
        out.keys.push_back(text);
        if (!reader.value(text)) {
          return false;
        }
        out.values.push_back(text);
      }
      return true;
  }
  return false;
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
  Reader reader(input, limits_);
  const Layout& layout = layoutOf(*command);
  for (std::uint8_t i = 0; i < layout.count && readField(reader, layout.fields[i], out); ++i) {
  }
  fields_read_ += reader.fieldsRead();
  DecodeResult result = reader.result(reader.position());
  // A wrong magic never reaches here: detection reads it as a legacy request.
  if (result.status == DecodeStatus::Complete) {
    first_request_ = false;
  }
  return result;
}

void WireWriter::u32(std::uint32_t value) {
  out_.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void WireWriter::i64(std::int64_t value) {
  out_.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void WireWriter::u64(std::uint64_t value) {
  out_.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void WireWriter::bytes(std::string_view value) {
  u64(value.size());
  out_.append(value);
}

void WireWriter::keyList(std::span<const std::string_view> keys) {
  u64(keys.size());
  for (std::string_view key : keys) {
    bytes(key);
  }
}

Request makeRequest(Command command, std::vector<std::string_view> keys,
                    std::vector<std::string_view> values, std::int64_t number, std::uint32_t word) {
  Request request;
  request.command = command;
  request.keys = std::move(keys);
  request.values = std::move(values);
  request.number = number;
  request.word = word;
  return request;
}

std::string encodeRequest(Dialect dialect, const Request& request) {
  std::string out;
  encodeRequest(dialect, request, out);
  return out;
}

void encodeRequest(Dialect dialect, const Request& request, std::string& out) {
  const auto byte = wireByte(dialect, request.command);
  if (!byte) {
    throw std::invalid_argument(std::string(commandName(request.command)) +
                                " does not exist in the " + std::string(dialectName(dialect)) +
                                " dialect");
  }
  WireWriter writer(out);
  writer.u8(*byte);
  std::size_t next_key = 0;
  std::size_t next_value = 0;
  const Layout& layout = layoutOf(request.command);
  for (std::uint8_t i = 0; i < layout.count; ++i) {
    switch (layout.fields[i]) {
      case Field::U32:
        writer.u32(request.word);
        break;
      case Field::I64:
        writer.i64(request.number);
        break;
      case Field::Key:
        writer.bytes(request.keys.at(next_key++));
        break;
      case Field::Value:
        writer.bytes(request.values.at(next_value++));
        break;
      case Field::KeyList:
        writer.keyList(request.keys);
        break;
      case Field::Pairs:
        writer.u64(request.keys.size());
        for (std::size_t k = 0; k < request.keys.size(); ++k) {
          writer.bytes(request.keys[k]);
          writer.bytes(request.values.at(k));
        }
        break;
    }
  }
}

}  // namespace ddprun::proto
