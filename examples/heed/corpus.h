// Character-level text: UTF-8 decoding with byte-exact error positions, the vocabulary (the sorted
// set of Unicode code points in the corpus, as nanoGPT's shakespeare_char prepare.py), encoding, and
// the random batches nanoGPT's get_batch draws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/random.h"

namespace heed::cli {

/// Decodes UTF-8 into code points. Throws heed::Error naming `what` and the byte offset of the
/// first invalid sequence (overlong forms, surrogates and values above U+10FFFF are invalid).
std::u32string decode_utf8(const std::string& bytes, const std::string& what);
std::string encode_utf8(const std::u32string& text);
std::string encode_utf8(char32_t c);

class Vocab {
 public:
  Vocab() = default;
  explicit Vocab(std::u32string chars);  ///< the characters in id order (unique; any order)
  static Vocab from_text(const std::u32string& text);
  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  const std::u32string& chars() const { return chars_; }
  /// Ids of `text`; throws heed::Error naming `what`, the character and its position (the byte
  /// offset in UTF-8, and the character index) if one is not in the vocabulary.
  std::vector<int32_t> encode(const std::u32string& text, const std::string& what) const;
  std::string decode(int32_t id) const { return encode_utf8(chars_.at(id)); }
  /// Where sampling starts without a prompt: the id of "\n", as nanoGPT's sample.py, or 0 if the
  /// vocabulary has no newline.
  int32_t start_id() const;

 private:
  std::u32string chars_;
  std::vector<int32_t> lookup_;  // code point -> id for code points < lookup_.size(), else -1
};

/// Random (x, y) batches of `batch` windows of `block` tokens: x = data[i:i+block], y shifted by one,
/// with i uniform in [0, len - block) as nanoGPT's get_batch.
void sample_batch(const std::vector<int32_t>& data, int64_t batch, int64_t block, Generator& gen,
                  std::vector<int32_t>& x, std::vector<int32_t>& y);

}  // namespace heed::cli
