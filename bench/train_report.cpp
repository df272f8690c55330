// Parses the trainers' throughput lines and prints train_bench's table.
#include "train_report.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "format.hpp"

namespace ddprun::bench {
namespace {

std::string medianCell(const Samples& samples, const char* pattern) {
  return samples.empty() ? "–" : formatNumber(pattern, samples.median());
}

// The text after `key=` up to the next space, if the key is there.
std::optional<std::string> field(const std::string& line, const std::string& key) {
  const auto at = line.find(" " + key + "=");
  if (at == std::string::npos) {
    return std::nullopt;
  }
  const auto begin = at + key.size() + 2;
  return line.substr(begin, line.find(' ', begin) - begin);
}

std::optional<Throughput> parseLine(const std::string& line) {
  const auto at = line.find("throughput:");
  if (at == std::string::npos) {
    return std::nullopt;
  }
  const std::string rest = line.substr(at + 11);  // starts with the space before samples=
  const auto samples = field(rest, "samples");
  const auto seconds = field(rest, "seconds");
  if (!samples || !seconds) {
    return std::nullopt;
  }
  try {
    return Throughput{std::stoll(*samples), std::stod(*seconds)};
  } catch (const std::exception&) {  // a malformed line counts as none
    return std::nullopt;
  }
}

}  // namespace

std::optional<Throughput> readThroughput(const std::filesystem::path& log) {
  std::ifstream in(log);
  std::optional<Throughput> last;
  std::string line;
  while (std::getline(in, line)) {
    if (auto parsed = parseLine(line)) {
      last = parsed;
    }
  }
  return last;
}

std::optional<double> targetRatio(const std::string& task, bool progress_cost) {
  if (progress_cost) {
    return 0.99;
  }
  if (task == "mlp") {
    return 1.5;  // a tiny model: per-step overhead, where Python costs most
  }
  if (task == "fmnist") {
    return 1.0;  // the matrix products dominate: at least break even
  }
  return std::nullopt;
}

void printTrainReport(std::ostream& out, const TrainReport& report) {
  out << "\n" << report.setup << "\n\n";
  const char* second = report.progress_cost ? "progress off" : "torchrun+python";
  out << "| Task | ddprun+train samples/s | " << second << " samples/s | ratio | target | met? "
      << "| ddprun+train wall s | " << second << " wall s | Other processes' CPU, cores |\n"
      << "|---|---:|---:|---:|---:|---|---:|---:|---:|\n";
  for (const auto& row : report.tasks) {
    const bool measured = !row.ddprun_rate.empty() && !row.python_rate.empty();
    const double ratio = measured ? row.ddprun_rate.median() / row.python_rate.median() : 0.0;
    const auto target = targetRatio(row.task, report.progress_cost);
    std::string met = "–";
    if (measured && target) {
      met = ratio >= *target ? "yes" : "**no**";
    }
    out << "| " << row.task << " | " << medianCell(row.ddprun_rate, "%.0f") << " | "
        << medianCell(row.python_rate, "%.0f") << " | "
        << (measured ? formatNumber("%.2f×", ratio) : "–") << " | "
        << (target ? formatNumber(report.progress_cost ? "≥ %.2f×" : "≥ %.1f×", *target) : "–")
        << " | " << met << " | " << medianCell(row.ddprun_wall, "%.2f") << " | "
        << medianCell(row.python_wall, "%.2f") << " | " << formatNumber("%.2f", row.other_cores)
        << " |\n";
  }
  if (!report.notes.empty()) {
    out << "\nNotes:\n";
    for (const auto& note : report.notes) {
      out << "- " << note << '\n';
    }
  }
}

}  // namespace ddprun::bench
