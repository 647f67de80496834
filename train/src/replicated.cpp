// check_replicated: every copy of a replicated tensor bitwise equal (replicated.h).
#include "dtw/train/replicated.h"

#include <cstring>
#include <sstream>
#include <vector>

#include "dtw/array.h"
#include "dtw/errors.h"
#include "dtw/kernels/vector.h"

namespace dtw::train {

template <TrainElement T>
std::int64_t check_replicated(Replica<T>& replica, Comm& group, std::string_view when) {
  const Replication& rep = replica.plan().replicated;
  DTW_CHECK_ARG(rep.group_size == group.size() && rep.group_rank == group.rank(),
                "check_replicated: the plan says rank " << rep.group_rank << " of a group of "
                                                        << rep.group_size << ", the group is rank "
                                                        << group.rank() << " of " << group.size());
  // Every member packs its copies in the plan's order: the same layout on all.
  std::vector<T> mine;
  for (const std::string& name : rep.tensors) {
    const auto t = replica.tensor(name);
    const std::vector<T> host =
        kernels::to_host(replica.exec().place(), std::span<const T>(t.params));
    mine.insert(mine.end(), host.begin(), host.end());
  }
  const auto n = static_cast<std::int64_t>(mine.size());
  // The allgather runs where the group keeps its data (a device backend
  // takes device memory only): through Arrays on the replica's Exec.
  const Array<T> sent(replica.exec(), std::span<const T>(mine));
  Array<T> gathered(replica.exec(), n * group.size());
  group.reference_allgather(as_buffer(sent.span()), as_buffer(gathered.span()));
  const std::vector<T> all = gathered.to_vector();
  // Every member looks at every copy, so all reach the same verdict and raise
  // the same error: nobody is left waiting in a later collective.
  for (int q = 1; q < group.size(); ++q) {
    const T* copy = all.data() + q * n;
    for (std::int64_t i = 0; i < n; ++i) {
      if (std::memcmp(&copy[i], &all[static_cast<std::size_t>(i)], sizeof(T)) == 0) continue;
      std::int64_t k = i;
      for (const std::string& name : rep.tensors) {
        const auto t = replica.tensor(name);
        const auto size = static_cast<std::int64_t>(t.params.size());
        if (k >= size) {
          k -= size;
          continue;
        }
        std::ostringstream os;
        os.precision(17);
        os << "replicated tensor " << name << " differs " << when << " at element " << k
           << " (whole index " << t.whole_index(k) << "): group rank 0 (world rank "
           << group.world_rank_of(0) << ") holds " << all[static_cast<std::size_t>(i)]
           << ", group rank " << q << " (world rank " << group.world_rank_of(q) << ") holds "
           << copy[i] << "; replicated tensors must get the same update on every rank of "
           << "their group (sum their gradients over the group before stepping)";
        throw InvalidArgument(os.str());
      }
    }
  }
  return n;
}

template std::int64_t check_replicated<float>(Replica<float>&, Comm&, std::string_view);
template std::int64_t check_replicated<double>(Replica<double>&, Comm&, std::string_view);

}  // namespace dtw::train
