// The README's first program: four ranks pass a token around a ring; the
// report counts every byte. Exits 1 if the token did not travel as expected.
#include <dtw/dtw.h>

#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  // Four ranks pass a token around a ring; the report counts every byte.
  dtw::Report report = dtw::launch(4, [](dtw::Comm& comm) {
    std::vector<std::int64_t> token{0};
    const int right = (comm.rank() + 1) % comm.size();
    const int left = (comm.rank() + comm.size() - 1) % comm.size();
    if (comm.rank() == 0) comm.send(token, right);
    comm.recv(token, left);
    if (comm.rank() != 0) comm.send(token, right);
  });
  std::puts(report.traffic_table().c_str());
  // Four messages of one int64 each: 32 bytes in all.
  if (report.total_bytes() != 4 * 8) {
    std::fprintf(stderr, "first_program: expected 32 bytes on the wire, got %lld\n",
                 static_cast<long long>(report.total_bytes()));
    return 1;
  }
  return 0;
}
