// Bytes per axis: every byte a hybrid run sends is accounted for by the
// chapters' formulas, pair of world ranks by pair of world ranks.
//
// The traffic record (report.traffic.bytes(src, dst)) of a whole run on
// threads is compared, for every ordered pair of world ranks, with the sum
// of what each piece of the step sends on that pair. World rank =
// (stage · dp + replica) · tp + slice, so a pair's axis is the coordinate(s)
// in which the two ranks differ. What is counted, per step (e: the element
// size; ring(n, r, t): chapter 01's ring allreduce of n values, in which rank
// r sends all chunks of Chunks(n, t) but chunk r (reduce-scatter) and all but
// chunk r+1 (allgather), every message to rank r+1 of its group):
//
//   tp  rank k → k+1 of its stage's tp group, per micro-batch of n = rows·C:
//       ring(n) for the embedding's forward (stage with "embed"), 4 per block
//       of the stage, one for the head's input gradient, and the
//       vocab-parallel loss's ring(rows) and ring(2·rows) (stage with "head")
//   pp  per micro-batch and stage boundary: the activation forward and its
//       gradient back (boundary_elements of the cut); with pp > 1, the tied
//       wte's gradient (the slice's V/t·C rows) from the last stage to the
//       first and the stepped wte back
//   dp  rank d → d+1 of its dp group: for each range the stage's replicas
//       step (chapter 05's stage_plan on the slice's units), a ring allreduce
//       -- or under ZeRO-1 a ring reduce-scatter and a ring allgather, which
//       send the same chunks
//   world  the {Σ g², loss} allreduce: ring(2) doubles, r → r+1 of the world
//          (it crosses whichever coordinates differ between r and r+1)
//
// The Grid's 7 splits of the world (one per non-empty combination of pp, dp,
// tp; each a ring exchange of (color, key) on a reserved tag) are not in the
// traffic record: measured between two points around make_grid, they add 0
// bytes (GridTrafficTest below checks it, so the day the runtime counts them
// the formulas above must grow a term, not this test a tolerance).
// Nothing else may move: a pair that no piece names must show 0 bytes.
#include "hybrid_test.h"

#include <map>
#include <sstream>

#include "dtw/chunks.h"
#include "dtw/model/units.h"
#include "dtw/train/micro_batches.h"
#include "dtw/train/network.h"

namespace dtw::ch08 {
namespace {

using testing::layout;

// Values rank r of t sends in chapter 01's ring reduce-scatter, allgather
// and allreduce of n values (0 on a group of one).
std::int64_t rs_values(std::int64_t n, int r, int t) { return t == 1 ? 0 : n - Chunks(n, t).size(r); }
std::int64_t ag_values(std::int64_t n, int r, int t) {
  return t == 1 ? 0 : n - Chunks(n, t).size((r + 1) % t);
}
std::int64_t ring(std::int64_t n, int r, int t) { return rs_values(n, r, t) + ag_values(n, r, t); }

// Expected bytes per ordered pair of world ranks, by the piece that sends them.
class Expected {
 public:
  explicit Expected(int p) : p_(p) {}
  void add(const std::string& piece, int src, int dst, std::int64_t bytes) {
    if (bytes == 0) return;
    EXPECT_NE(src, dst) << piece << ": the formula sends from rank " << src << " to itself";
    by_piece_[{src, dst}][piece] += bytes;
  }
  std::int64_t total(int src, int dst) const {
    std::int64_t sum = 0;
    if (auto it = by_piece_.find({src, dst}); it != by_piece_.end())
      for (const auto& [piece, bytes] : it->second) sum += bytes;
    return sum;
  }
  std::string pieces(int src, int dst) const {
    std::ostringstream s;
    if (auto it = by_piece_.find({src, dst}); it != by_piece_.end())
      for (const auto& [piece, bytes] : it->second) s << " " << piece << " " << bytes;
    return s.str().empty() ? " nothing" : s.str();
  }
  int ranks() const { return p_; }

 private:
  int p_;
  std::map<std::pair<int, int>, std::map<std::string, std::int64_t>> by_piece_;
};

struct At {
  const Layout& l;
  int operator()(int s, int d, int k) const { return (s * l.dp + d) * l.tp + k; }
  Coords of(int w) const { return {w / (l.tp * l.dp), w / l.tp % l.dp, w % l.tp}; }
};

// Which coordinates differ between two world ranks: "tp", "dp", "pp+dp"...
std::string axis_of(const At& at, int a, int b) {
  const Coords x = at.of(a), y = at.of(b);
  std::string s;
  for (auto [differs, name] : {std::pair{x.stage != y.stage, "pp"}, std::pair{x.replica != y.replica, "dp"},
                               std::pair{x.slice != y.slice, "tp"}})
    if (differs) {
      if (!s.empty()) s += '+';
      s += name;
    }
  return s;
}

Expected expected_bytes(const train::RunSpec& spec, const Layout& l) {
  const model::ModelConfig c = spec.config();
  const std::int64_t e = spec.dtype == train::DType::kFloat64 ? 8 : 4;
  const int p = l.ranks(), m = l.micro_batches;
  const At at{l};
  Expected x(p);
  const ch05::StageMap map = ch05::make_stage_map(spec, ch05::Balance::kParams, l.pp, 1, m, nullptr);
  const auto net = train::Network<double>::make(c);
  const int head_unit = static_cast<int>(c.layers) + 1;  // units: embed, h.0 … h.L−1, head
  for (std::int64_t step = 0; step < spec.steps; ++step)
    for (int d = 0; d < l.dp; ++d)
      for (int mb = 0; mb < m; ++mb) {
        const train::Batch b = train::micro_batch(spec, step, d, l.dp, mb, m);
        const std::int64_t rows = b.rows * b.seq_len, n = rows * c.dim;
        for (int s = 0; s < l.pp; ++s) {
          const model::UnitRange u = map.chunks[static_cast<std::size_t>(s)];
          const bool embed = u.begin == 0, head = u.end == head_unit + 1;
          const std::int64_t blocks = std::min<std::int64_t>(u.end, head_unit) - std::max(u.begin, 1);
          const std::int64_t acts = 4 * blocks + (embed ? 1 : 0) + (head ? 1 : 0);
          for (int k = 0; k < l.tp; ++k) {
            const std::int64_t loss = head ? ring(rows, k, l.tp) + ring(2 * rows, k, l.tp) : 0;
            x.add("tp", at(s, d, k), at(s, d, (k + 1) % l.tp), e * (acts * ring(n, k, l.tp) + loss));
            if (s + 1 < l.pp) {
              const std::int64_t boundary = net->boundary_elements(u.end, b);
              x.add("pp", at(s, d, k), at(s + 1, d, k), e * boundary);
              x.add("pp", at(s + 1, d, k), at(s, d, k), e * boundary);
            }
          }
        }
      }
  for (int k = 0; k < l.tp; ++k) {
    const model::ParamLayout local = model::param_layout(c, ch06::megatron_shard(c, k, l.tp));
    const std::int64_t wte = model::head_is_tied(c) ? model::tied_wte(c, local).end : 0;
    const std::vector<model::Unit> units = model::model_units(c, local);
    for (int d = 0; d < l.dp; ++d) {
      if (l.pp > 1) {  // the tied wte: gradient to the embedding's stage, parameters back
        x.add("pp wte", at(l.pp - 1, d, k), at(0, d, k), spec.steps * e * wte);
        x.add("pp wte", at(0, d, k), at(l.pp - 1, d, k), spec.steps * e * wte);
      }
      for (int s = 0; s < l.pp; ++s) {
        std::int64_t values = 0;
        for (const train::Range& r : ch05::stage_plan(map, units, wte, s).optimizer)
          values += l.zero1 ? rs_values(r.size(), d, l.dp) + ag_values(r.size(), d, l.dp)
                            : ring(r.size(), d, l.dp);
        x.add(l.zero1 ? "dp rs+ag" : "dp allreduce", at(s, d, k), at(s, (d + 1) % l.dp, k),
              spec.steps * e * values);
      }
    }
  }
  for (int r = 0; r < p && p > 1; ++r) {
    x.add("world {Σg², loss}", r, (r + 1) % p, spec.steps * 8 * ring(2, r, p));
  }
  return x;
}

// Every ordered pair of world ranks of `out` against the formulas.
void expect_bytes(const train::RunSpec& spec, const Layout& l, const train::RunOutcome& out) {
  const Expected x = expected_bytes(spec, l);
  const At at{l};
  const double steps = static_cast<double>(spec.steps);
  for (int src = 0; src < x.ranks(); ++src)
    for (int dst = 0; dst < x.ranks(); ++dst) {
      if (src == dst) continue;
      const std::int64_t want = x.total(src, dst), got = out.report.traffic.bytes(src, dst);
      EXPECT_EQ(got, want) << l.describe() << ", " << name_of(spec.dtype) << ", axis "
                           << axis_of(at, src, dst) << ": rank " << src << " → rank " << dst
                           << " sent " << got << " bytes (" << static_cast<double>(got) / steps
                           << " per step), the formulas say " << want << " ("
                           << static_cast<double>(want) / steps << " per step):" << x.pieces(src, dst);
    }
}

void expect_bytes_per_axis(const train::RunSpec& spec, const Layout& l) {
  DTW_TRACE("bytes per axis of " + l.describe() + ", " + ::dtw::testing::describe_run(spec, l.ranks()));
  const train::RunOutcome out = testing::run_layout(spec, l);
  ASSERT_TRUE(out.matches) << l.describe() << ": " << out.mismatch;
  expect_bytes(spec, l, out);
}

DTW_TEST_STEPS(TrafficTest, "08.1", "08.2", "08.3", "08.4");
TEST(TrafficTest, EveryPairOfRanksSendsWhatItsAxisFormulasSay) {
  const train::RunSpec spec = testing::tiny(2, 8);
  for (const Layout& l : {layout(2, 2, 2, 2), layout(1, 4, 2, 2), layout(4, 2, 1, 4)})
    expect_bytes_per_axis(spec, l);
}

TEST(TrafficTest, UnderZeroOneTheDpGroupSendsAReduceScatterAndAnAllgather) {
  const train::RunSpec spec = testing::tiny(2, 8);
  for (const Layout& l : {layout(2, 2, 2, 2, true), layout(1, 4, 2, 2, true)})
    expect_bytes_per_axis(spec, l);
}

DTW_TEST_STEPS(GridTrafficTest, "08.1");
TEST(GridTrafficTest, MakingTheGridAddsNothingToTheTrafficRecord) {
  const Layout l = layout(2, 2, 2, 1);
  train::run_ranks<double>(testing::tiny(1), testing::on(8, false), [&](train::RankRun<double>& run) {
    // What this rank sent to each peer so far, by its traffic counters.
    auto sent = [&] {
      std::map<int, std::int64_t> bytes;
      for (const PeerTraffic& q : run.comm().traffic().peers()) bytes[q.peer] += q.bytes_sent;
      return bytes;
    };
    const auto before = sent();
    const train::Grid grid = make_grid(run.comm(), l);
    const Groups g = groups_of(grid);
    const auto after = sent();
    for (const auto& [peer, bytes] : after) {
      const auto it = before.find(peer);
      EXPECT_EQ(bytes, it == before.end() ? 0 : it->second)
          << "rank " << run.comm().rank() << " → rank " << peer
          << ": making the grid's groups added bytes to the record; count the splits in the formulas";
    }
    EXPECT_EQ(g.world->size(), 8);
  });
}

TEST(TrafficTest, InFloatTheActivationsAndGradientsTravelInFourBytes) {
  train::RunSpec spec = testing::tiny(2, 8);
  spec.dtype = train::DType::kFloat32;
  const Layout l = layout(2, 2, 2, 2);
  DTW_TRACE("float32 " + l.describe());
  // Not compared with the reference (float's tolerance is another test's
  // business): this checks the element size of every formula.
  const train::RunOutcome out = train::run_ranks<float>(
      spec, testing::on(8, false), [&](train::RankRun<float>& run) { train_hybrid(run, l); });
  expect_bytes(spec, l, out);
}

}  // namespace
}  // namespace dtw::ch08
