#include "dist/communicator.h"

#include <cstdlib>
#include <cstring>

#include "core/check.h"

namespace heed::dist {

Request LocalCommunicator::send(const float*, int64_t, int to, int) {
  detail::fail("send: there is no rank ", to, " in a one-process run");
}
Request LocalCommunicator::recv(float*, int64_t, int from, int) {
  detail::fail("recv: there is no rank ", from, " in a one-process run");
}
bool LocalCommunicator::test(Request r) { detail::fail("test: no request ", r, " in a one-process run"); }
void LocalCommunicator::wait(Request r) { detail::fail("wait: no request ", r, " in a one-process run"); }

std::vector<char> LocalCommunicator::all_gather(const void* data, size_t bytes) {
  std::vector<char> out(bytes);
  if (bytes) std::memcpy(out.data(), data, bytes);
  return out;
}

void LocalCommunicator::abort(int exit_code) { std::_Exit(exit_code); }

bool any_rank(Communicator& comm, bool flag) {
  const char mine = flag ? 1 : 0;
  for (char c : comm.all_gather(&mine, 1))
    if (c) return true;
  return false;
}

}  // namespace heed::dist
