// Step 08.4: the composed run. Nothing here is a new algorithm: chapter 06's
// seams cut every layer over the tp group, chapter 05's executor runs 1F1B
// over the pp group, the training layer's micro-batch rule gives each dp
// replica its share of the batch, and step 08.3 ends every step. The lesson
// is the glue: which group each piece gets, and that every rank builds the
// same pieces in the same order (the chapter text: "The composition").
#include <string>

#include "dtw/train/replicated.h"
#include "hybrid_parallelism.h"

namespace dtw::ch08 {

template <TrainElement T>
void train_hybrid(train::RankRun<T>& run, const Layout& layout) {
  const train::RunSpec& spec = run.spec();
  DTW_TODO("08.4: Compose the run (the layout checked first, on every rank): the grid and its groups, this rank's replica with Megatron's seams on its tp group, the executor on its pp group with this replica's micro-batches and 08.3's end of step; train, record, report.");
}

template <TrainElement T>
void hybrid(train::RankRun<T>& run) {
  train_hybrid(run, layout_from_knobs(run.knobs(), run.spec(), run.comm().size()));
}

template void train_hybrid<float>(train::RankRun<float>&, const Layout&);
template void train_hybrid<double>(train::RankRun<double>&, const Layout&);
template void hybrid<float>(train::RankRun<float>&);
template void hybrid<double>(train::RankRun<double>&);

}  // namespace dtw::ch08
