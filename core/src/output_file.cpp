#include "dtw/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "dtw/errors.h"

namespace dtw {

void check_writable(const std::string& path, std::string_view what) {
  namespace fs = std::filesystem;
  DTW_CHECK_ARG(!path.empty(), what << ": the file name is empty");
  std::error_code ec;
  DTW_CHECK_ARG(!fs::is_directory(path, ec),
                what << ": cannot write " << path << ": it is a folder");
  const fs::path folder = fs::path(path).parent_path();
  DTW_CHECK_ARG(folder.empty() || fs::is_directory(folder, ec),
                what << ": cannot write " << path << ": the folder " << folder.string()
                     << " does not exist");
  const bool existed = fs::exists(path, ec);
  // O_APPEND without O_TRUNC: an existing file keeps its contents until the
  // program really writes it.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const int error = errno;
  DTW_CHECK_ARG(fd >= 0, what << ": cannot write " << path << ": " << std::strerror(error));
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

namespace {

// Makes the missing folders down to `dir` and a probe file in `dir`, then
// removes what it made (never what another made). The filesystem is asked,
// not the mode bits: root passes access() for /proc, where mkdir fails.
// Another rank checking the same folder at once may make it before us (we
// make nothing) and remove it before our probe: then the missing folders are
// looked for again. Returns 0 or the errno of the first step that failed: a
// folder's mkdir (its path in `where`) or the probe's (`where` empty).
int try_folder(const std::filesystem::path& dir, std::string& where) {
  namespace fs = std::filesystem;
  static std::atomic<unsigned> count{0};
  const fs::path probe = dir / (".dtw-probe-" + std::to_string(::getpid()) + "-" +
                                std::to_string(count.fetch_add(1)));
  int error = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::error_code ec;
    std::vector<fs::path> below;  // the folders missing now, outermost first
    for (fs::path p = dir; !fs::exists(fs::symlink_status(p, ec)) && p.has_relative_path();
         p = p.parent_path())
      below.insert(below.begin(), p);
    std::vector<fs::path> made;
    error = 0;
    for (const fs::path& p : below) {
      if (::mkdir(p.c_str(), 0755) == 0) {
        made.push_back(p);
      } else if (errno != EEXIST) {
        error = errno;
        where = p.string();
        break;
      }
    }
    if (error == 0) {
      const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::close(fd);
        ::unlink(probe.c_str());
      } else {
        error = errno;
        where.clear();
      }
    }
    // Innermost first; a folder another check is using is not empty and stays.
    for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir(it->c_str());
    // ENOENT after making what was missing: another check removed a folder
    // under us (or the filesystem makes none, as /proc: then every try fails).
    if (error != ENOENT) break;
  }
  return error;
}

// The file `path` names, as one spelling: absolute, links resolved as far as
// the path exists, "." and ".." gone.
std::filesystem::path file_of(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec).lexically_normal();
  const fs::path resolved = fs::weakly_canonical(absolute, ec);
  return ec ? absolute : resolved;
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  if (a == b) return true;
  std::error_code ec;  // two names of one existing file (a hard link)
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

}  // namespace

void check_distinct_outputs(const std::vector<OutputPath>& outputs) {
  std::vector<std::filesystem::path> files;
  for (const OutputPath& o : outputs) files.push_back(o.path.empty() ? "" : file_of(o.path));
  for (std::size_t i = 0; i < outputs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) {
      if (outputs[i].path.empty() || outputs[j].path.empty()) continue;
      DTW_CHECK_ARG(!same_file(files[i], files[j]),
                    outputs[j].what << " (" << outputs[j].path << ") and " << outputs[i].what
                                    << " (" << outputs[i].path << ") are the same file "
                                    << files[i].string()
                                    << ": one would replace the other; give each output a file "
                                       "of its own");
    }
}

void check_folder_writable(const std::string& dir, std::string_view what) {
  namespace fs = std::filesystem;
  DTW_CHECK_ARG(!dir.empty(), what << ": the folder name is empty");
  std::error_code ec;
  // The nearest part of the path that exists is where the folders get made.
  const fs::path full = fs::absolute(dir, ec).lexically_normal();
  fs::path at = full;
  while (!fs::exists(fs::symlink_status(at, ec)) && at.has_parent_path() && at != at.parent_path())
    at = at.parent_path();
  const std::string why = at == full ? "" : " (its part " + at.string() + ")";
  // A folder another rank's check made and removed since we looked is not in
  // the way: try_folder looks again.
  // One stat, so that a folder removed and made again between two looks is
  // never taken for a file.
  const fs::file_type type = fs::status(at, ec).type();
  DTW_CHECK_ARG(type == fs::file_type::directory || type == fs::file_type::not_found,
                what << ": cannot make the folder " << dir << ": "
                     << (why.empty() ? "it" : at.string()) << " exists and is not a folder");
  const int access_error = ::access(at.c_str(), W_OK | X_OK) == 0 ? 0 : errno;
  DTW_CHECK_ARG(access_error == 0 || access_error == ENOENT,
                what << ": cannot write into the folder " << dir << why << ": "
                     << std::strerror(access_error));
  std::string where;
  const int error = try_folder(full, where);
  DTW_CHECK_ARG(error == 0 || !where.empty(),
                what << ": cannot write into the folder " << dir << ": " << std::strerror(error));
  DTW_CHECK_ARG(error == 0, what << ": cannot make the folder " << dir
                                 << (where == full.string() ? "" : " (its part " + where + ")")
                                 << ": " << std::strerror(error));
}

void write_file(const std::string& path, std::string_view contents, std::string_view what) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  const int open_error = errno;
  DTW_CHECK(file != nullptr, Error, what << ": cannot write " << path << ": " << std::strerror(open_error));
  const bool written = std::fwrite(contents.data(), 1, contents.size(), file) == contents.size();
  int error = errno;
  const bool closed = std::fclose(file) == 0;
  if (written) error = errno;
  DTW_CHECK(written && closed, Error, what << ": writing " << path << " failed: " << std::strerror(error));
}

}  // namespace dtw
