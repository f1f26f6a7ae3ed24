// Resources are checked before they are spent: every command estimates the memory its flags (or
// its checkpoint's config) need before allocating any of it, and refuses, naming the flags or the
// file, when the estimate exceeds the memory limit.
//
// The limit is the memory the system gives this process: the smallest of the machine's RAM
// (MemTotal in /proc/meminfo), the cgroup's memory.max (v2) or memory.limit_in_bytes (v1), and the
// address-space rlimit (RLIMIT_AS, less what the process maps already). `--memory-limit SIZE` or
// the environment variable HEED_MEMORY_LIMIT (bytes, or with a K, M, G or T suffix: "2G") replace
// it, in that order of precedence.
//
// The estimates were fitted to the peak RSS of measured runs (docs/reliability.md, which lists them)
// and err on the high side: 1.3-1.7 times the measured peak for training a GPT.
#pragma once

#include <cstdint>
#include <string>

#include "nn/gpt.h"

namespace heed::cli {

/// Parses "123", "512M", "1.5G" (powers of 1024) into bytes; throws UsageError naming `what`.
uint64_t parse_size(const std::string& text, const std::string& what);
/// "1.50 GiB", "312 MiB".
std::string format_bytes(double bytes);

/// Sets the limit from --memory-limit (empty: none given).
void set_memory_limit_flag(const std::string& text);
/// The memory heed may use, in bytes (see above); `source` (optional) gets where it came from.
uint64_t memory_limit(std::string* source = nullptr);

/// Throws when `bytes` exceed memory_limit(): a UsageError when `usage` (flags asked for it), else
/// a heed::Error (a file did). The message names `what`, the estimate, the limit and its source.
void require_memory(double bytes, const std::string& what, bool usage);

/// Parameters of a GPT with this config, counted once (the tied lm_head with wte).
double gpt_parameters(const nn::GPTConfig& c);
/// Peak bytes of training a GPT on batches of `batch` sequences of c.block_size tokens: weights,
/// gradients, AdamW's moments, a checkpoint being written, and the activations autograd keeps.
double gpt_training_bytes(const nn::GPTConfig& c, int64_t batch);
/// Peak bytes of loading a checkpoint of `c` (the file, its tensors, the model).
double gpt_loading_bytes(const nn::GPTConfig& c);
/// Bytes one forward pass without gradients needs per sequence of `T` tokens.
double gpt_forward_bytes_per_row(const nn::GPTConfig& c, int64_t T);

}  // namespace heed::cli
