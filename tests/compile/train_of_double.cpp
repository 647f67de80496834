// Control: the training layer and chapters 02-05 on a supported element type
// compile (the same calls as the *_of_short cases, with double).
#include <cstdint>
#include <span>

#include "data_parallelism.h"
#include "dtw/model/gpt.h"
#include "dtw/model/gpt_layers.h"
#include "dtw/train/replica.h"
#include "parameter_server.h"
#include "pipeline_parallelism.h"
#include "sharded_checkpoint.h"
#include "zero.h"

void train_in_double(dtw::Comm& comm, dtw::train::RankRun<double>& run,
                     dtw::train::Replica<double>& replica, dtw::model::Gpt<double>& gpt,
                     dtw::ch04::ShardedGrads<double>& grads, const dtw::model::ParamLayout& layout,
                     std::span<const double> params, const dtw::ch05::Schedule& schedule,
                     const dtw::ch05::StageMap& map, double* y, const double* x) {
  (void)dtw::ch02::fingerprint(layout, params);
  (void)dtw::ch03::ps_sync(run);
  (void)grads.grads(0);
  (void)dtw::ch04::load_checkpoint(comm, replica, "ckpt");
  (void)dtw::ch05::activation_peak<double>(schedule, map, run.spec(), 0, false);
  replica.step(0);
  gpt.backward(y, y);
  dtw::model::linear_forward(y, x, x, x, 1, 1, 1);
}
