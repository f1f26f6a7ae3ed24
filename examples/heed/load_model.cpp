#include "load_model.h"

#include "commands.h"
#include "io.h"
#include "nn/gpt_checkpoint.h"
#include "stop.h"

namespace heed::cli {

LoadedModel load_model(const std::string& path, const std::string& flag) {
  if (path.empty()) throw UsageError(flag + " is required");
  const ExitAtOnceOnStop only_reading;  // the library's parsing and copying of a large file never polls a stop
  const std::string bytes = read_input_file(path, 4.0);  // the bytes, the parsed tensors, their float32 copies, the model
  nn::LoadedGPT loaded =
      nn::load_gpt_checkpoint_from_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
  const std::u32string chars = decode_utf8(loaded.vocab_utf8, path + ": metadata \"vocab\"");
  HEED_CHECK(static_cast<int64_t>(chars.size()) == loaded.model->config().vocab_size, path,
             ": metadata \"vocab\" has ", chars.size(), " characters but config vocab_size is ",
             loaded.model->config().vocab_size);
  LoadedModel m{loaded.model, Vocab(chars)};
  m.model->eval();
  return m;
}

}  // namespace heed::cli
