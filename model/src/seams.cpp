// The identity seams (seams.h): what a rank holding the whole model calls.
#include "dtw/model/seams.h"

namespace dtw::model {

const char* name_of(Site site) {
  switch (site) {
    case Site::kEmbedding: return "embedding";
    case Site::kAttention: return "attention";
    case Site::kMlp: return "mlp";
    case Site::kHead: return "head";
  }
  return "?";
}

template <TrainElement T>
std::span<const T> Seams<T>::enter(Site, int, std::span<const T> x, kernels::Vector<T>&) {
  return x;
}

template <TrainElement T>
std::span<const T> Seams<T>::leave(Site, int, std::span<T> y, kernels::Vector<T>&) {
  return y;
}

template <TrainElement T>
std::span<const T> Seams<T>::leave_backward(Site, int, std::span<const T> dy, kernels::Vector<T>&) {
  return dy;
}

template <TrainElement T>
std::span<const T> Seams<T>::enter_backward(Site, int, std::span<T> dx, kernels::Vector<T>&) {
  return dx;
}

template <TrainElement T>
Seams<T>& identity_seams() {
  // Stateless (the plain core keeps nothing between calls), so every rank
  // thread may share one.
  static Seams<T> seams;
  return seams;
}

template class Seams<float>;
template class Seams<double>;
template Seams<float>& identity_seams<float>();
template Seams<double>& identity_seams<double>();

}  // namespace dtw::model
