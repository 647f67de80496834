#include "dtw/errors.h"

#include <cstring>

namespace dtw {

Error::Error(std::string message, const char* file, int line) : message_(std::move(message)) {
  if (file && *file) {
    // Keep the path from the project root on: "core/src/comm.cpp:41". The root
    // is where this very file was compiled from, when `file` shares it.
    std::string path(file);
    static const std::string project_root = [] {
      const std::string self(__FILE__);
      const auto pos = self.rfind("base/src/errors.cpp");
      return pos == std::string::npos ? std::string() : self.substr(0, pos);
    }();
    if (!project_root.empty() && path.rfind(project_root, 0) == 0) {
      where_ = path.substr(project_root.size()) + ":" + std::to_string(line);
      format();
      return;
    }
    // Otherwise cut at the outermost project folder ("tests/core/x", not "core/x").
    auto cut = std::string::npos;
    for (const char* root : {"/base/", "/core/", "/kernels/", "/model/", "/train/", "/solutions/", "/labs/", "/tests/", "/tools/",
                             "/bench/", "/chapters/"}) {
      const auto pos = path.rfind(root);
      if (pos != std::string::npos && (cut == std::string::npos || pos < cut)) cut = pos;
    }
    if (cut != std::string::npos) path = path.substr(cut + 1);
    where_ = path + ":" + std::to_string(line);
  }
  format();
}

void Error::set_rank(int rank) {
  rank_ = rank;
  format();
}

void Error::add_note(const std::string& note) {
  // The same context set twice (a test's and its helper's) says nothing new.
  for (const std::string& n : notes_)
    if (n == note) return;
  notes_.push_back(note);
  format();
}

void Error::format() {
  what_.clear();
  if (rank_ >= 0 && message_.rfind("rank ", 0) != 0) what_ = "rank " + std::to_string(rank_) + ": ";
  what_ += message_;
  if (!where_.empty()) what_ += " [" + where_ + "]";
  for (const std::string& note : notes_) what_ += "\n  while: " + note;
}

}  // namespace dtw
