#include "corpus.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "stop.h"

namespace heed::cli {

namespace {
// Long loops over a text check for a stop signal every 2^22 characters (a few milliseconds).
constexpr size_t kStopCheckMask = (size_t(1) << 22) - 1;
}  // namespace

std::u32string decode_utf8(const std::string& s, const std::string& what) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  for (size_t chars = 0; i < n; ++chars) {
    if ((chars & kStopCheckMask) == 0) check_stop();  // a large corpus takes seconds
    const unsigned char c = p[i];
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    int len;
    char32_t cp, min;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
    else detail::fail(what, ": invalid UTF-8 at byte offset ", i, " (byte 0x", std::hex, int(c), ")");
    HEED_CHECK(i + len <= n, what, ": invalid UTF-8 at byte offset ", i, " (truncated sequence at end of input)");
    for (int k = 1; k < len; ++k) {
      HEED_CHECK((p[i + k] & 0xC0) == 0x80, what, ": invalid UTF-8 at byte offset ", i,
                 " (bad continuation byte at offset ", i + k, ")");
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    HEED_CHECK(cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF), what,
               ": invalid UTF-8 at byte offset ", i, " (overlong, surrogate or out-of-range code point)");
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string encode_utf8(char32_t c) {
  std::string o;
  if (c < 0x80) {
    o += static_cast<char>(c);
  } else if (c < 0x800) {
    o += static_cast<char>(0xC0 | (c >> 6));
    o += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    o += static_cast<char>(0xE0 | (c >> 12));
    o += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    o += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    o += static_cast<char>(0xF0 | (c >> 18));
    o += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    o += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    o += static_cast<char>(0x80 | (c & 0x3F));
  }
  return o;
}

std::string encode_utf8(const std::u32string& text) {
  std::string o;
  for (char32_t c : text) o += encode_utf8(c);
  return o;
}

Vocab::Vocab(std::u32string chars) : chars_(std::move(chars)) {
  // Any order (a checkpoint's vocab is in id order, which need not be sorted); no repeats, and
  // only Unicode code points.
  const char32_t max = chars_.empty() ? 0 : *std::max_element(chars_.begin(), chars_.end());
  HEED_CHECK(max <= 0x10FFFF, "vocabulary: U+", std::hex, uint32_t(max), " is not a Unicode code point");
  lookup_.assign(size_t(max) + 1, -1);
  for (size_t i = 0; i < chars_.size(); ++i) {
    HEED_CHECK(lookup_[chars_[i]] < 0, "vocabulary: the character at position ", i, " repeats position ",
               lookup_[chars_[i]]);
    lookup_[chars_[i]] = static_cast<int32_t>(i);
  }
}

Vocab Vocab::from_text(const std::u32string& text) {
  // One pass marking the code points present (no sorted copy of a text of any size), then the
  // marked ones in order: the sorted set.
  std::vector<bool> present(0x110000, false);
  for (size_t i = 0; i < text.size(); ++i) {
    if ((i & kStopCheckMask) == 0) check_stop();
    HEED_CHECK(text[i] < present.size(), "vocabulary: U+", std::hex, uint32_t(text[i]), " is not a Unicode code point");
    present[text[i]] = true;
  }
  std::u32string chars;
  for (char32_t c = 0; c < present.size(); ++c)
    if (present[c]) chars.push_back(c);
  return Vocab(std::move(chars));
}

int32_t Vocab::start_id() const {
  const auto nl = chars_.find(U'\n');
  return nl == std::u32string::npos ? 0 : static_cast<int32_t>(nl);
}

std::vector<int32_t> Vocab::encode(const std::u32string& text, const std::string& what) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if ((i & kStopCheckMask) == 0) check_stop();
    const char32_t c = text[i];
    const int32_t id = c < lookup_.size() ? lookup_[c] : -1;
    if (id < 0) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "U+%04X", unsigned(c));
      std::string shown;  // appended piecewise: "'" + s + "' " trips GCC 12's false -Wrestrict (PR 105329)
      if (c >= 0x20 && c != 0x7F) shown.append("'").append(encode_utf8(c)).append("' ");
      size_t byte = 0;  // where it is in the UTF-8 input
      for (size_t k = 0; k < i; ++k) byte += encode_utf8(text[k]).size();
      detail::fail(what, ": character ", shown, "(", buf, ") at byte offset ", byte, " (character ", i,
                   ") is not in the model's vocabulary");
    }
    ids[i] = id;
  }
  return ids;
}

void sample_batch(const std::vector<int32_t>& data, int64_t batch, int64_t block, Generator& gen,
                  std::vector<int32_t>& x, std::vector<int32_t>& y) {
  const int64_t n = static_cast<int64_t>(data.size());
  HEED_CHECK(n > block + 1, "batch: ", n, " tokens are too few for block size ", block);
  x.resize(batch * block);
  y.resize(batch * block);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t i = gen.randint(n - block);
    std::copy_n(data.begin() + i, block, x.begin() + b * block);
    std::copy_n(data.begin() + i + 1, block, y.begin() + b * block);
  }
}

}  // namespace heed::cli
