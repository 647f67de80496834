#include "dtw/errors.h"

#include <cstring>

namespace dtw {

Error::Error(std::string message, const char* file, int line) : message_(std::move(message)) {
  if (file && *file) {
    // Keep the path from the project root on: "core/src/comm.cpp:41".
    std::string path(file);
    for (const char* root : {"/core/", "/kernels/", "/solutions/", "/labs/", "/tests/", "/tools/",
                             "/bench/", "/chapters/"}) {
      const auto pos = path.rfind(root);
      if (pos != std::string::npos) {
        path = path.substr(pos + 1);
        break;
      }
    }
    where_ = path + ":" + std::to_string(line);
  }
  format();
}

void Error::set_rank(int rank) {
  rank_ = rank;
  format();
}

void Error::format() {
  what_.clear();
  if (rank_ >= 0 && message_.rfind("rank ", 0) != 0) what_ = "rank " + std::to_string(rank_) + ": ";
  what_ += message_;
  if (!where_.empty()) what_ += " [" + where_ + "]";
}

}  // namespace dtw
