// Writing a file so that nothing is lost when the write fails: the path
// holds either its previous content or the complete new one. Used by
// save_safetensors and by the benchmark's results file.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace fusedconv::detail {

// Appends bytes to the file being written; throws Error on a failed write.
using ByteSink = std::function<void(const void *data, size_t bytes)>;

// Calls `produce` with a sink into a new file beside `path` (created
// exclusively, so no other file is touched), flushes it to disk and renames
// it over `path`. An existing `path` keeps its permission bits. A `path`
// that exists but is not a regular file (a directory, a FIFO, a device) is
// refused before anything is written; a symbolic link is followed, so its
// target is replaced and the link kept. On any failure, an exception from
// `produce` included, the new file is removed, `path` is left as it was, and
// the Error says "`what` '<path>': <reason>".
void write_file_atomically(const std::string &path, const std::string &what,
                           const std::function<void(const ByteSink &)> &produce);

}  // namespace fusedconv::detail
