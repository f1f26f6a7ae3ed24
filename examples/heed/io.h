// Files and output of the `heed` command line, with the guarantees docs/reliability.md lists:
//   - an input is read only if it is a regular file (a FIFO or a device is refused without
//     blocking on it), only if the memory its contents need fits (resources.h), and a stop
//     signal is honoured while a large file is read;
//   - every file is written atomically (temporary file, fsync, rename): a crash or a full disk
//     leaves the old file or the new one, never a torn one;
//   - standard output is complete or the command fails: a failed write (a full disk, a closed
//     pipe) is an OutputError, and text is written byte for byte (NUL characters included).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"

namespace heed::cli {

/// Writing standard output failed (exit code 1; what() says why).
class OutputError : public Error {
 public:
  using Error::Error;
};

/// Reads the regular file `path` whole. `memory_per_byte` is what the caller will need per byte
/// of it (the bytes themselves included): the read is refused up front when that exceeds the
/// memory limit. Throws heed::Error naming `path` for a missing or unreadable file, a directory,
/// a FIFO, socket or device, or a file that grows past its size while being read; honours a stop
/// signal between chunks (stop.h).
std::string read_input_file(const std::string& path, double memory_per_byte = 1.0);

/// At most the first `n` bytes of the regular file `path` (the same refusals as read_input_file).
std::string read_input_prefix(const std::string& path, size_t n);

/// The size in bytes of the regular file `path` (the same refusals as read_input_file, without
/// reading it).
uint64_t regular_file_size(const std::string& path);

/// Writes `text` to `path` atomically (`path.tmp.<pid>`, fsync, rename); throws heed::Error naming
/// the path. An existing `path` is kept intact on failure.
void write_file_atomically(const std::string& path, std::string_view text);

/// Appends one line to a file and fsyncs it (log.jsonl).
void append_line(const std::string& path, const std::string& line);

/// Writes `text` to standard output exactly (NULs included) and flushes it; throws OutputError.
void write_stdout(std::string_view text);
/// The same for generated text, one token at a time: flushed at once on a terminal, where the user
/// watches it appear; into a pipe or a file at most every 100 ms (and by write_stdout or
/// finish_stdout), so that the reader is not woken for every character: on a 2-core machine each
/// wake-up took a core from the generation's threads (`heed sample` into a pipe ran ~1.5x slower).
void write_stdout_token(std::string_view text);
/// Flushes standard output; throws OutputError if it or any earlier write failed.
void finish_stdout();

/// True when `a` and `b` name the same file (the same inode if both exist, else the same path once
/// made absolute and normalised): an output must never be one of the command's inputs.
bool same_file(const std::string& a, const std::string& b);

/// `path` made absolute and normalised lexically ("a/../b" is "b", as the shell's cd does; a
/// symlink named before ".." is not followed), or `path` itself if the working directory is gone:
/// how every command names the files and directories it is given.
std::string absolute_path(const std::string& path);

/// Refuses (UsageError naming `flag`) to replace an existing `path` that is not a file of the kind
/// the command writes, recognised by its first bytes (`signature`, "<svg" for a drawing): a
/// drawing may be redrawn, a checkpoint or a text given by mistake is never overwritten.
void require_own_output(const std::string& path, const std::string& flag, std::string_view signature);

/// Whether `s` is valid UTF-8 (paths recorded in TOML and JSON must be).
bool is_utf8(std::string_view s);

}  // namespace heed::cli
