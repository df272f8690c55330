// Slurm's hostlist syntax (see the header), parsed once into items and
// brackets, then counted, expanded, or read for its first host. The rules
// follow Slurm 22.05's src/common/hostlist.c (_hostlist_create_bracketed,
// _parse_single_range, _push_range_list) where it accepts a list, and
// refuse where it guesses.
#include "ddprun/launcher/slurm/slurm_hostlist.hpp"

#include <cctype>
#include <charconv>
#include <cstdint>

namespace ddprun::launcher {
namespace {

// Numbers up to 18 digits fit in 64 bits with room for a range's size.
constexpr std::size_t kMaxDigits = 18;

struct NumberRange {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  std::size_t width = 0;  // digits of lo as written: every number is padded to it
};

// One bracket of an item: the text before it and its numbers.
struct Bracket {
  std::string_view text_before;
  std::vector<NumberRange> ranges;
};

// One comma-separated item: a plain name, or text with brackets.
struct Item {
  std::string_view name;  // the whole item when it has no bracket
  std::vector<Bracket> brackets;
};

bool allDigits(std::string_view text) {
  for (const char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return !text.empty();
}

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

class HostlistParser {
 public:
  explicit HostlistParser(std::string_view list) : list_(list) {}

  // Every item, checked, with the list's host count within kMaxHostsInList.
  std::vector<Item> parse() {
    std::vector<Item> items;
    std::uint64_t total = 0;
    for (const std::string_view text : splitItems()) {
      items.push_back(parseItem(text));
      total += countOf(items.back());
      if (total > kMaxHostsInList) {
        fail("names more than " + std::to_string(kMaxHostsInList) + " hosts");
      }
    }
    return items;
  }

  static std::uint64_t countOf(const Item& item) {
    std::uint64_t count = 1;
    for (const Bracket& bracket : item.brackets) {
      std::uint64_t in_bracket = 0;
      for (const NumberRange& range : bracket.ranges) {
        in_bracket += range.hi - range.lo + 1;
      }
      // Saturates just past the list's bound, which the caller refuses.
      count = count > kMaxHostsInList / in_bracket ? kMaxHostsInList + 1 : count * in_bracket;
    }
    return count;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw HostlistError(list_, why); }

  // Commas outside brackets separate items; brackets neither nest nor stay open.
  std::vector<std::string_view> splitItems() const {
    if (list_.empty()) {
      fail("is empty");
    }
    std::vector<std::string_view> items;
    bool in_bracket = false;
    std::size_t start = 0;
    for (std::size_t i = 0; i < list_.size(); ++i) {
      const auto c = static_cast<unsigned char>(list_[i]);
      if (std::isspace(c) || std::iscntrl(c)) {
        fail("a blank or control character at offset " + std::to_string(i));
      }
      if (c == '[' && in_bracket) {
        fail("a '[' inside a bracket at offset " + std::to_string(i));
      }
      if (c == ']' && !in_bracket) {
        fail("a ']' without '[' at offset " + std::to_string(i));
      }
      in_bracket = (c == '[') || (in_bracket && c != ']');
      if (c == ',' && !in_bracket) {
        items.push_back(list_.substr(start, i - start));
        start = i + 1;
      }
    }
    if (in_bracket) {
      fail("a '[' without ']'");
    }
    items.push_back(list_.substr(start));
    for (const std::string_view item : items) {
      if (item.empty()) {
        fail("an empty item");
      }
    }
    return items;
  }

  Item parseItem(std::string_view text) const {
    Item item;
    std::size_t at = 0;
    for (auto open = text.find('['); open != std::string_view::npos; open = text.find('[', at)) {
      const auto close = text.find(']', open);  // splitItems saw it balanced
      item.brackets.push_back(
          {text.substr(at, open - at), parseRanges(text.substr(open + 1, close - open - 1))});
      at = close + 1;
    }
    if (item.brackets.empty()) {
      item.name = text;
    } else if (at != text.size()) {
      fail("text " + quoted(text.substr(at)) + " after the last bracket of " + quoted(text) +
           " (Slurm refuses it too)");
    }
    return item;
  }

  std::vector<NumberRange> parseRanges(std::string_view inside) const {
    std::vector<NumberRange> ranges;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= inside.size(); ++i) {
      if (i == inside.size() || inside[i] == ',') {
        ranges.push_back(parseRange(inside.substr(start, i - start), inside));
        start = i + 1;
      }
    }
    return ranges;
  }

  NumberRange parseRange(std::string_view text, std::string_view inside) const {
    const auto dash = text.find('-');
    const std::string_view lo = text.substr(0, dash);
    const std::string_view hi = dash == std::string_view::npos ? lo : text.substr(dash + 1);
    if (!allDigits(lo) || !allDigits(hi)) {
      fail(quoted(text) + " in [" + std::string(inside) + "] is not a number or a range lo-hi");
    }
    NumberRange range{number(lo), number(hi), lo.size()};
    if (range.lo > range.hi) {
      fail("the range " + std::string(text) + " is reversed");
    }
    if (range.hi - range.lo + 1 > kMaxHostsInRange) {
      fail("the range " + std::string(text) + " has more than " + std::to_string(kMaxHostsInRange) +
           " hosts (Slurm's limit)");
    }
    return range;
  }

  std::uint64_t number(std::string_view digits) const {
    if (digits.size() > kMaxDigits) {
      fail("the number " + std::string(digits) + " has more than " + std::to_string(kMaxDigits) +
           " digits");
    }
    std::uint64_t value = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return value;
  }

  std::string_view list_;
};

void appendNumber(std::string& host, std::uint64_t number, std::size_t width) {
  const std::string digits = std::to_string(number);
  if (digits.size() < width) {
    host.append(width - digits.size(), '0');
  }
  host += digits;
}

// Appends every host of `item` from bracket `k` on, `host` holding the
// part before it: the leftmost bracket varies slowest, as in Slurm.
void expandFrom(const Item& item, std::size_t k, std::string& host,
                std::vector<std::string>& hosts) {
  if (k == item.brackets.size()) {
    hosts.push_back(host);
    return;
  }
  const std::size_t kept = host.size();
  const Bracket& bracket = item.brackets[k];
  for (const NumberRange& range : bracket.ranges) {
    for (std::uint64_t number = range.lo; number <= range.hi; ++number) {
      host.resize(kept);
      host += bracket.text_before;
      appendNumber(host, number, range.width);
      expandFrom(item, k + 1, host, hosts);
    }
  }
  host.resize(kept);
}

}  // namespace

HostlistError::HostlistError(std::string_view list, const std::string& reason)
    : ConfigError("hostlist " + quoted(list) + ": " + reason), reason_(reason) {}

std::vector<std::string> expandHostlist(std::string_view list) {
  std::vector<std::string> hosts;
  for (const Item& item : HostlistParser(list).parse()) {
    if (item.brackets.empty()) {
      hosts.emplace_back(item.name);
      continue;
    }
    std::string host;
    expandFrom(item, 0, host, hosts);
  }
  return hosts;
}

std::string firstHost(std::string_view list) {
  const Item first = HostlistParser(list).parse().front();
  if (first.brackets.empty()) {
    return std::string(first.name);
  }
  std::string host;
  for (const Bracket& bracket : first.brackets) {
    host += bracket.text_before;
    appendNumber(host, bracket.ranges.front().lo, bracket.ranges.front().width);
  }
  return host;
}

std::size_t hostCount(std::string_view list) {
  std::size_t count = 0;
  for (const Item& item : HostlistParser(list).parse()) {
    count += HostlistParser::countOf(item);
  }
  return count;
}

}  // namespace ddprun::launcher
