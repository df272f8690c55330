// What the dynamic loader has to do before ddprun's main(): the shared
// libraries the ddprun executable names (its DT_NEEDED entries, as readelf
// lists them). Each one is mapped, relocated and has its symbols resolved at
// every start; libstdc++, spdlog and fmt, and OpenSSL's two libraries were
// half of `ddprun --version`'s time (docs/benchmarks.md, "Where a launch's
// time goes"), so the first three are linked into the executable
// (ddprun_program() in cmake/DdprunHelpers.cmake; not under the sanitizers,
// whose runtimes need the shared libstdc++), and OpenSSL is in the etcd TLS
// module, loaded for protocol=https only.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ddprun/test_support/command.hpp"

namespace ddprun::launcher {
namespace {

// What a binutils tool (readelf, nm) prints, in the C locale.
std::string toolOutput(const std::vector<std::string>& argv) {
  test_support::CommandOptions options;
  options.env = {{"PATH", "/usr/bin:/bin"}, {"LC_ALL", "C"}};
  const auto result = test_support::runCommand(argv, options);
  EXPECT_EQ(result.code, 0) << result.errors;
  return result.output;
}

// `readelf -d program`: its dynamic section.
std::string dynamicSection(const std::string& program) {
  return toolOutput({"readelf", "-d", program});
}

// `nm --defined-only program`: the symbols it defines, one per line.
std::string symbolTable(const std::string& program) {
  return toolOutput({"nm", "--defined-only", program});
}

// The sonames `readelf -d` lists as NEEDED for `program`.
std::set<std::string> neededLibraries(const std::string& program) {
  const std::string dynamic = dynamicSection(program);
  std::set<std::string> needed;
  const std::regex entry(R"(\(NEEDED\)\s+Shared library: \[([^\]]+)\])");
  for (std::sregex_iterator it(dynamic.begin(), dynamic.end(), entry), end; it != end; ++it) {
    needed.insert((*it)[1].str());
  }
  return needed;
}

// Whether `program`'s symbol table defines `name` (nm; a stripped program
// has none to read, so the build's own is what this checks).
bool definesSymbol(const std::string& program, const std::string& name) {
  const std::string symbols = symbolTable(program);
  const std::regex entry("^[0-9a-f]+ [A-Za-z] " + name + "$", std::regex::multiline);
  return std::regex_search(symbols, entry);
}

bool namesLibrary(const std::set<std::string>& needed, const std::string& prefix) {
  for (const std::string& soname : needed) {
    if (soname.rfind(prefix, 0) == 0) {
      return true;
    }
  }
  return false;
}

TEST(DdprunLinkingTest, StartsWithoutTheCxxRuntimeSpdlogOrFmtAsSharedLibraries) {
#if DDPRUN_SANITIZED
  GTEST_SKIP() << "a sanitized build links the shared libstdc++ on purpose";
#endif
  const std::set<std::string> needed = neededLibraries(DDPRUN_BINARY);
  ASSERT_TRUE(namesLibrary(needed, "libc.so")) << "readelf listed no libc: not its output?";
  for (const char* library : {"libstdc++.so", "libgcc_s.so", "libspdlog.so", "libfmt.so"}) {
    EXPECT_FALSE(namesLibrary(needed, library)) << DDPRUN_BINARY << " needs " << library;
  }
}

// OpenSSL is neither a library ddprun needs nor linked into it: only the TLS
// module has it, as Debian's shared libssl3, whose security updates then
// apply without a rebuild.
TEST(DdprunLinkingTest, StartsWithoutOpenSsl) {
  const std::set<std::string> needed = neededLibraries(DDPRUN_BINARY);
  ASSERT_TRUE(namesLibrary(needed, "libc.so")) << "readelf listed no libc: not its output?";
  for (const char* library : {"libssl.so", "libcrypto.so"}) {
    EXPECT_FALSE(namesLibrary(needed, library)) << DDPRUN_BINARY << " needs " << library;
  }
  EXPECT_FALSE(definesSymbol(DDPRUN_BINARY, "SSL_CTX_new")) << "OpenSSL is linked into ddprun";
  EXPECT_FALSE(definesSymbol(DDPRUN_BINARY, "EVP_MD_fetch")) << "OpenSSL is linked into ddprun";
}

TEST(DdprunLinkingTest, ItsTlsModuleNeedsDebiansSharedOpenSsl) {
  const std::set<std::string> module_needs = neededLibraries(DDPRUN_ETCD_TLS_MODULE);
  EXPECT_TRUE(namesLibrary(module_needs, "libssl.so.3")) << DDPRUN_ETCD_TLS_MODULE;
  EXPECT_TRUE(namesLibrary(module_needs, "libcrypto.so.3")) << DDPRUN_ETCD_TLS_MODULE;
}

// hwloc and the libudev it needs are loaded only when --numa-binding reads
// the machine's topology (launcher/host/src/hwloc_library.hpp): mapped at
// every start, they cost 0.2 ms of each launch.
TEST(DdprunLinkingTest, StartsWithoutHwloc) {
  const std::set<std::string> needed = neededLibraries(DDPRUN_BINARY);
  ASSERT_TRUE(namesLibrary(needed, "libc.so")) << "readelf listed no libc: not its output?";
  for (const char* library : {"libhwloc.so", "libudev.so"}) {
    EXPECT_FALSE(namesLibrary(needed, library)) << DDPRUN_BINARY << " needs " << library;
  }
}

// Its ~9,000 relative relocations packed (DT_RELR): the loader reads
// 1.5 KiB of them at each start instead of 211 KiB of RELA entries.
TEST(DdprunLinkingTest, ItsRelativeRelocationsArePacked) {
  if (!DDPRUN_LINKER_PACKS_RELOCS) {
    GTEST_SKIP() << "this linker cannot pack relative relocations (binutils 2.38 or later)";
  }
  const std::string dynamic = dynamicSection(DDPRUN_BINARY);
  ASSERT_NE(dynamic.find("(NEEDED)"), std::string::npos) << "not readelf's output?\n" << dynamic;
  EXPECT_NE(dynamic.find("(RELR)"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find("(RELACOUNT)"), std::string::npos)
      << "relative relocations still as RELA entries:\n"
      << dynamic;
}

// `readelf -SW program`: its section headers.
std::string sectionHeaders(const std::string& program) {
  return toolOutput({"readelf", "-SW", program});
}

struct Span {
  std::uint64_t start = 0;
  std::uint64_t size = 0;
  bool holds(std::uint64_t address) const { return address >= start && address < start + size; }
};

// Where section `name` lies, from `readelf -SW`'s `headers`; size 0 when
// there is none.
Span sectionSpan(const std::string& headers_text, const std::string& name) {
  std::istringstream headers(headers_text);
  for (std::string line; std::getline(headers, line);) {
    const auto number_end = line.find("] ");
    if (number_end == std::string::npos) {
      continue;
    }
    std::istringstream fields(line.substr(number_end + 2));
    std::string section, type, address, offset, size;
    if (fields >> section >> type >> address >> offset >> size && section == name) {
      return {std::stoull(address, nullptr, 16), std::stoull(size, nullptr, 16)};
    }
  }
  return {};
}

// The address of the function whose mangled name starts with `prefix`, in
// nm's `symbols`.
std::optional<std::uint64_t> functionAddress(const std::string& symbols,
                                             const std::string& prefix) {
  std::smatch found;
  const std::regex entry("^([0-9a-f]+) [tT] " + prefix, std::regex::multiline);
  if (!std::regex_search(symbols, found, entry)) {
    return std::nullopt;
  }
  return std::stoull(found[1].str(), nullptr, 16);
}

// Those of the functions named by `prefixes` (of their mangled names) that
// `program` defines outside `span`, or does not define.
std::vector<std::string> functionsOutside(const std::string& program, const Span& span,
                                          const std::vector<std::string>& prefixes) {
  const std::string symbols = symbolTable(program);
  std::vector<std::string> outside;
  for (const std::string& prefix : prefixes) {
    const auto address = functionAddress(symbols, prefix);
    if (!address || !span.holds(*address)) {
      outside.push_back(prefix);
    }
  }
  return outside;
}

// The code a launch runs lies together before the rest of the text
// (launcher/app/launch_code.ld): a launch faults in about 12 windows of
// 64 KiB of code instead of 50. A function of every launch that is not in it
// means the script is stale: regenerate it with bench/launch_code_order.py.
TEST(DdprunLinkingTest, TheCodeALaunchRunsLiesTogether) {
  if (!DDPRUN_LINKER_ORDERS_LAUNCH_CODE) {
    GTEST_SKIP() << "this linker cannot INSERT a section into its default script";
  }
  const std::string headers = sectionHeaders(DDPRUN_BINARY);
  const Span launch = sectionSpan(headers, ".text.launch");
  const Span text = sectionSpan(headers, ".text");
  ASSERT_GT(text.size, 0u) << "no .text: not readelf's output?\n" << headers;
  ASSERT_GT(launch.size, 0u) << headers;
  EXPECT_LT(launch.start, text.start);
  EXPECT_LT(launch.size, 2u << 20) << "more than a launch runs";
  const std::vector<std::string> every_launch = {"main$", "_ZN6ddprun8launcher16parseCommandLine",
                                                 "_ZN6ddprun8launcher5Agent4Impl13launchAttempt",
                                                 "_ZN6ddprun8launcher10SubprocessC2",
                                                 "_ZN6ddprun8launcher9ExitWatchC2"};
  EXPECT_EQ(functionsOutside(DDPRUN_BINARY, launch, every_launch), std::vector<std::string>{})
      << "functions every launch runs are not in .text.launch: regenerate "
         "launcher/app/launch_code.ld with bench/launch_code_order.py";
}

}  // namespace
}  // namespace ddprun::launcher
