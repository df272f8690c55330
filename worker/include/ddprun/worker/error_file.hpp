// The error file torchrun's @record writes for a failing worker, written by a
// C++ worker: when TORCHELASTIC_ERROR_FILE is set, the launcher's failure
// report shows this message as the root cause instead of "<N/A>".
#pragma once

#include <string>

namespace ddprun::worker {

// Writes {"message": {"message": ..., "extraInfo": {"py_callstack": ...,
// "timestamp": ...}}} to $TORCHELASTIC_ERROR_FILE if it is set and the file
// does not exist yet (the first error wins, as with torch's @record). Never
// throws: a failing error report must not hide the error itself.
void writeErrorFile(const std::string& message);

}  // namespace ddprun::worker
