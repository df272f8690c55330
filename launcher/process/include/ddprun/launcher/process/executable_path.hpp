// Where execve would find a program: the one PATH search every part of
// ddprun uses (the worker's interpreter, spawning, the benchmarks). Stateless.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ddprun::launcher {

// `program` itself if it contains '/', else the first regular, executable
// file of that name on `path_variable` (a PATH value; an empty entry is the
// current directory). nullopt if there is none.
std::optional<std::string> findExecutable(const std::string& program,
                                          const std::string& path_variable);

// Every regular, executable file of that name on `path_variable`, in PATH
// order (the candidates after the first, for a caller that may pass one by).
std::vector<std::string> findExecutables(const std::string& program,
                                         const std::string& path_variable);

// A regular file this process may execute.
bool isExecutableFile(const std::string& path);

}  // namespace ddprun::launcher
