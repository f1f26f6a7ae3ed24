// heed: error checks. HEED_CHECK(cond, parts...) throws heed::Error with the parts streamed
// together, so messages can name the op and the shapes: HEED_CHECK(a == b, "matmul: ", s1, " @ ", s2).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace heed {

/// Every error heed raises on bad input (shapes, axes, files) is a heed::Error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class T>
void stream_part(std::ostringstream& os, const T& v) {
  if constexpr (requires { v.begin(); v.size(); } && !requires { os << v; }) {
    os << '[';
    size_t i = 0;
    for (const auto& e : v) os << (i++ ? ", " : "") << e;
    os << ']';
  } else {
    os << v;
  }
}
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  (stream_part(os, parts), ...);
  throw Error(os.str());
}
}  // namespace detail

}  // namespace heed

#define HEED_CHECK(cond, ...)                              \
  do {                                                     \
    if (!(cond)) [[unlikely]] ::heed::detail::fail(__VA_ARGS__); \
  } while (0)
