// The bytes of a sharded checkpoint (checkpoint_io.h). Plain host I/O: a
// shard file is small enough here to be read whole and checksummed.
#include "checkpoint_io.h"

#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "dtw/errors.h"
#include "dtw/model/params.h"

namespace dtw::ch04::ckpt {
namespace {

constexpr char kMagic[8] = {'D', 'T', 'W', 'Z', 'S', 'H', 'D', '1'};

std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void put(std::vector<char>& out, const void* data, std::size_t n) {
  if (n == 0) return;
  const std::size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, data, n);
}

std::int64_t get(const std::vector<char>& in, std::size_t& at, const std::string& path, int rank) {
  std::int64_t v = 0;
  DTW_CHECK_ARG(at + sizeof v <= in.size(), "rank " << rank << ": checkpoint file " << path
                                                    << " ends inside its header (truncated?)");
  std::memcpy(&v, in.data() + at, sizeof v);
  at += sizeof v;
  return v;
}

}  // namespace

std::uint64_t checksum(const std::vector<char>& bytes) { return fnv1a(bytes.data(), bytes.size()); }

std::uint64_t layout_hash(const train::RunSpec& spec) {
  std::uint64_t h = fnv1a(nullptr, 0);
  const model::ParamLayout layout = model::param_layout(spec.config());
  for (const model::ParamView& v : layout.views()) {
    h = fnv1a(v.name.data(), v.name.size(), h);
    h = fnv1a(v.shape.data(), v.shape.size() * sizeof(std::int64_t), h);
    h = fnv1a(&v.offset, sizeof v.offset, h);
  }
  return h;
}

std::string shard_name(int rank, int ranks, std::int64_t steps_done) {
  return "shard-" + std::to_string(rank) + "-of-" + std::to_string(ranks) + "-step-" +
         std::to_string(steps_done) + ".bin";
}

template <class T>
std::vector<char> encode_shard(train::Replica<T>& replica, int rank, int ranks,
                               std::int64_t steps_done) {
  const std::vector<train::Range>& ranges = replica.plan().optimizer;
  std::vector<char> out;
  put(out, kMagic, sizeof kMagic);
  const std::int64_t header[] = {rank, ranks, steps_done, static_cast<std::int64_t>(sizeof(T)),
                                 replica.optimizer_moments(), static_cast<std::int64_t>(ranges.size())};
  put(out, header, sizeof header);
  for (const train::Range& r : ranges) put(out, &r, sizeof r);
  for (const train::Range& r : ranges) {
    if (r.size() == 0) continue;
    put(out, replica.params(r).data(), static_cast<std::size_t>(r.size()) * sizeof(T));
    for (int k = 0; k < replica.optimizer_moments(); ++k)
      put(out, replica.optimizer_state(k, r.begin, r.end).data(),
          static_cast<std::size_t>(r.size()) * sizeof(T));
  }
  return out;
}

std::vector<SavedRange> decode_shard(const std::vector<char>& bytes, int element_bytes,
                                     int moments, const std::string& path, int rank) {
  const std::string who = "rank " + std::to_string(rank) + ": checkpoint file " + path;
  DTW_CHECK_ARG(bytes.size() >= sizeof kMagic && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0,
                who << " is not a dtw ZeRO shard");
  std::size_t at = sizeof kMagic;
  get(bytes, at, path, rank);  // rank, ranks, steps: the index already says
  get(bytes, at, path, rank);
  get(bytes, at, path, rank);
  const std::int64_t eb = get(bytes, at, path, rank), mo = get(bytes, at, path, rank);
  const std::int64_t n = get(bytes, at, path, rank);
  DTW_CHECK_ARG(eb == element_bytes && mo == moments,
                who << " holds " << eb << "-byte values with " << mo << " moments; the index says "
                    << element_bytes << " and " << moments);
  DTW_CHECK_ARG(n >= 0 && n < (1 << 24), who << " claims " << n << " ranges");
  std::vector<SavedRange> out(static_cast<std::size_t>(n));
  for (SavedRange& s : out) {
    s.range.begin = get(bytes, at, path, rank);
    s.range.end = get(bytes, at, path, rank);
  }
  auto offset = static_cast<std::int64_t>(at);
  for (SavedRange& s : out) {
    s.params = offset;
    offset += s.range.size() * eb;
    for (int k = 0; k < moments; ++k, offset += s.range.size() * eb) s.moments.push_back(offset);
  }
  DTW_CHECK_ARG(offset == static_cast<std::int64_t>(bytes.size()),
                who << " is " << bytes.size() << " bytes; its ranges need " << offset);
  return out;
}

std::string format_entry(const FileEntry& e) {
  std::ostringstream s;
  s << "file " << e.name << " bytes " << e.bytes << " checksum " << std::hex << e.checksum
    << std::dec << " ranges";
  for (std::size_t i = 0; i < e.ranges.size(); ++i)
    s << (i ? "," : " ") << e.ranges[i].begin << ":" << e.ranges[i].end;
  if (e.ranges.empty()) s << " -";
  return s.str();
}

FileEntry parse_entry(const std::string& line, const std::string& path, int rank) {
  std::istringstream s(line);
  std::string file, bytes, sum, ranges, list;
  FileEntry e;
  s >> file >> e.name >> bytes >> e.bytes >> sum >> std::hex >> e.checksum >> std::dec >> ranges >> list;
  DTW_CHECK_ARG(s && file == "file" && bytes == "bytes" && sum == "checksum" && ranges == "ranges",
                "rank " << rank << ": checkpoint index " << path << ": bad line '" << line << "'");
  std::istringstream items(list == "-" ? "" : list);
  for (std::string item; std::getline(items, item, ',');) {
    const std::size_t colon = item.find(':');
    DTW_CHECK_ARG(colon != std::string::npos, "rank " << rank << ": checkpoint index " << path
                                                      << ": bad range '" << item << "'");
    e.ranges.push_back({std::stoll(item.substr(0, colon)), std::stoll(item.substr(colon + 1))});
  }
  return e;
}

std::string format_index(const Index& index) {
  const CheckpointInfo& i = index.info;
  std::ostringstream s;
  s << "dtw-zero-checkpoint 1\nmodel " << i.model << "\nmodel_size " << i.model_size
    << "\nlayout_hash " << std::hex << i.layout_hash << std::dec << "\nelement_bytes "
    << i.element_bytes << "\nmoments " << i.moments << "\nranks " << i.ranks << "\nsteps_done "
    << i.steps_done << "\nlosses" << std::setprecision(17);
  for (double l : i.losses) s << " " << l;
  s << "\n";
  for (const FileEntry& e : index.files) s << format_entry(e) << "\n";
  return s.str();
}

Index parse_index(const std::string& text, const std::string& path, int rank) {
  Index index;
  CheckpointInfo& i = index.info;
  std::istringstream in(text);
  std::string line, key;
  std::getline(in, line);
  DTW_CHECK_ARG(line == "dtw-zero-checkpoint 1",
                "rank " << rank << ": " << path << " is not a dtw ZeRO checkpoint index");
  while (std::getline(in, line)) {
    std::istringstream s(line);
    s >> key;
    if (key == "file") {
      index.files.push_back(parse_entry(line, path, rank));
    } else if (key == "losses") {
      for (double l; s >> l;) i.losses.push_back(l);
    } else if (key == "model") { s >> i.model;
    } else if (key == "model_size") { s >> i.model_size;
    } else if (key == "layout_hash") { s >> std::hex >> i.layout_hash;
    } else if (key == "element_bytes") { s >> i.element_bytes;
    } else if (key == "moments") { s >> i.moments;
    } else if (key == "ranks") { s >> i.ranks;
    } else if (key == "steps_done") { s >> i.steps_done;
    } else {
      DTW_CHECK_ARG(false, "rank " << rank << ": checkpoint index " << path << ": unknown line '" << line << "'");
    }
  }
  DTW_CHECK_ARG(static_cast<std::int64_t>(i.losses.size()) == i.steps_done &&
                    static_cast<int>(index.files.size()) == i.ranks,
                "rank " << rank << ": checkpoint index " << path << " lists " << i.losses.size()
                        << " losses for " << i.steps_done << " steps and " << index.files.size()
                        << " files for " << i.ranks << " ranks (truncated?)");
  return index;
}

std::vector<char> read_file(const std::string& path, int rank) {
  std::ifstream in(path, std::ios::binary);
  DTW_CHECK_ARG(in.good(), "rank " << rank << ": cannot read checkpoint file " << path);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template std::vector<char> encode_shard<float>(train::Replica<float>&, int, int, std::int64_t);
template std::vector<char> encode_shard<double>(train::Replica<double>&, int, int, std::int64_t);

}  // namespace dtw::ch04::ckpt
