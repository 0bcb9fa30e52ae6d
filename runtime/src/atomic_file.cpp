#include "atomic_file.h"

#include "fusedconv/error.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <sys/stat.h>
#include <unistd.h>

namespace fusedconv::detail {

namespace {

namespace fs = std::filesystem;

// The file that `path` names: `path` itself, or the target of a symbolic link.
fs::path resolve_target(const std::string &path, const std::string &what) {
    std::error_code ec;
    const fs::file_status link = fs::symlink_status(path, ec);
    if (!fs::is_symlink(link)) return path;
    fs::path target = fs::canonical(path, ec);
    if (ec) {
        throw Error(what + " '" + path + "': a symbolic link whose target cannot be resolved (" +
                    ec.message() + ")");
    }
    return target;
}

// A name beside `target` that no other writer of this process picks.
fs::path temporary_name(const fs::path &target) {
    static std::atomic<unsigned> counter{0};
    return target.string() + ".tmp-" + std::to_string(::getpid()) + "-" +
           std::to_string(counter.fetch_add(1));
}

}  // namespace

void write_file_atomically(const std::string &path, const std::string &what,
                           const std::function<void(const ByteSink &)> &produce) {
    const std::string prefix = what + " '" + path + "': ";
    if (path.empty()) throw Error(what + ": empty file name");
    const fs::path target = resolve_target(path, what);
    struct stat existing {};
    const bool exists = ::stat(target.c_str(), &existing) == 0;
    if (exists && !S_ISREG(existing.st_mode)) {
        throw Error(prefix + "exists and is not a regular file; refusing to replace it");
    }

    const fs::path tmp = temporary_name(target);
    // "x": fail rather than reuse a file that happens to have this name.
    std::FILE *f = std::fopen(tmp.c_str(), "wbx");
    if (!f) {
        throw Error(prefix + "cannot open for writing (creating '" + tmp.string() +
                    "'): " + std::strerror(errno));
    }
    auto discard = [&](const std::string &why) {
        std::fclose(f);
        std::remove(tmp.c_str());
        throw Error(prefix + why);
    };
    if (exists && ::fchmod(::fileno(f), existing.st_mode & 07777) != 0) {
        discard(std::string("cannot set the new file's permissions: ") + std::strerror(errno));
    }
    ByteSink sink = [&](const void *data, size_t bytes) {
        if (bytes > 0 && std::fwrite(data, 1, bytes, f) != bytes) {
            throw Error(std::string("write failed: ") + std::strerror(errno));
        }
    };
    try {
        produce(sink);
    } catch (const std::exception &e) {
        discard(e.what());  // the sink's "write failed: ...", or the producer's own Error
    }
    if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0) {
        discard(std::string("write failed: ") + std::strerror(errno));
    }
    if (std::fclose(f) != 0) {
        const std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        throw Error(prefix + "write failed: " + why);
    }
    if (std::rename(tmp.c_str(), target.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        throw Error(prefix + "cannot replace it with the new file: " + why);
    }
}

}  // namespace fusedconv::detail
