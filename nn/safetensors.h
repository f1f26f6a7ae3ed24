// heed::nn: reading and writing safetensors files (https://github.com/huggingface/safetensors),
// the format of heed's checkpoints (docs/checkpoint-format.md):
//
//   [8 bytes: N, little-endian u64][N bytes: JSON header, space-padded to a multiple of 8][data]
//   header: {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//            "__metadata__": {"key": "value", ...}}     offsets are relative to the data section
//
// Writing is atomic: a temporary file in the same directory is written, flushed to disk and renamed
// over the target, so a crash or a full disk never leaves a half-written checkpoint behind.
// Reading trusts nothing in the file: every structural problem is a heed::Error naming the file,
// the tensor or field, and the problem, and no byte sequence makes the parser read out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"

namespace heed::nn {

/// A safetensors file's contents: the tensors in data order (for heed's files, the order they were
/// saved in, larger elements first) and the string metadata.
struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<std::pair<std::string, Tensor>> tensors;
};

/// Writes `tensors` (F32, F64, I32, I64 or BOOL by dtype, PyTorch's names; any strides: written
/// row-major; data in the given order, larger elements first so each is aligned to its size) and
/// `metadata` to `path` atomically (temporary file `path.tmp.<pid>`, fsync, rename, fsync of the directory). On failure
/// the temporary file is removed, an existing `path` is left intact, and heed::Error names the
/// path and the system's reason. Names must be unique and not "__metadata__".
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata);

/// Reads a safetensors file. F32, F64, I32, I64 and BOOL tensors keep their type (a BOOL byte
/// other than 0 reads as true); F16 and BF16 become float32.
/// Throws heed::Error if the file cannot be read or is malformed (see parse_safetensors).
SafetensorsFile load_safetensors(const std::string& path);

/// Parses safetensors bytes (`what` names the source in errors). Rejects, with a heed::Error: fewer
/// than 8 bytes, a header length past the end or over 100 MB, a header that is not a JSON object
/// (or nests deeper than 64, or repeats a key), an entry that is not an object, a dtype other than
/// F32/F64/F16/BF16/I32/I64/BOOL, a shape that is not an array of non-negative integers whose product (times
/// the element size) fits in int64, data_offsets that are not two non-negative integers with
/// begin <= end inside the data section, a byte count other than numel times the element size,
/// tensors whose bytes overlap, and a __metadata__ that is not an object of strings.
SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& what);

/// Writes `module`'s state_dict() (every parameter under each of its names, and the buffers) to
/// `path` as save_safetensors does (atomically), with `metadata`: torch's
/// `safetensors.torch.save_file(model.state_dict(), path)`.
void save_state_dict(const Module& module, const std::string& path,
                     const std::map<std::string, std::string>& metadata = {});

/// Loads a safetensors file into `module` with load_state_dict(tensors, strict): the errors name
/// the file and every missing, unexpected or mis-shaped key, and nothing is copied on an error.
Module::LoadResult load_state_dict(Module& module, const std::string& path, bool strict = true);

}  // namespace heed::nn
