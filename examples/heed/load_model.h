// A GPT checkpoint read for use by a command (`sample`, `eval`, `train --init-from`): the model and
// its vocabulary, each checked against the other.
#pragma once

#include <memory>
#include <string>

#include "corpus.h"
#include "nn/gpt.h"

namespace heed::cli {

struct LoadedModel {
  std::shared_ptr<nn::GPT> model;  ///< in eval mode
  Vocab vocab;
};

/// Reads a GPT checkpoint, heed's or a nanoGPT-named PyTorch one (a regular file whose loading fits
/// in memory; its config's sizes are backed by the tensors in the file before the model is built,
/// nn/gpt_checkpoint.h). `flag` names the option that gave the path ("--checkpoint") in errors.
LoadedModel load_model(const std::string& path, const std::string& flag = "--checkpoint");

}  // namespace heed::cli
