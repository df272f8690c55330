// The request encoder and the wire primitives' writer. Request layouts come
// from the table the decoder reads too (tcpstore_layout.hpp).
#include <stdexcept>

#include "ddprun/proto/tcpstore_codec.hpp"
#include "tcpstore_layout.hpp"

namespace ddprun::proto {

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
  using layout::Field;
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
  const layout::Layout& fields = layout::of(request.command);
  for (std::uint8_t i = 0; i < fields.count; ++i) {
    switch (fields.fields[i]) {
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
