#include "io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "commands.h"
#include "corpus.h"
#include "resources.h"
#include "stop.h"

namespace heed::cli {

namespace fs = std::filesystem;

namespace {

// What st_mode is, for a refusal that says it.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Opens `path` for reading without blocking (a FIFO with no writer would block open() itself),
// refuses anything but a regular file, then makes reads blocking again. Returns the descriptor
// and fills `st`.
int open_regular(const std::string& path, struct stat& st) {
  HEED_CHECK(!path.empty(), "an empty path is not a file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  HEED_CHECK(fd >= 0, path, ": cannot open (", std::strerror(errno), ")");
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    detail::fail(path, ": cannot read its status (", std::strerror(err), ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    detail::fail(path, ": is ", kind_of(st.st_mode), ", not a regular file (heed reads only regular files)");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

uint64_t regular_file_size(const std::string& path) {
  struct stat st {};
  ::close(open_regular(path, st));
  return static_cast<uint64_t>(st.st_size);
}

std::string read_input_prefix(const std::string& path, size_t n) {
  struct stat st {};
  const int fd = open_regular(path, st);
  std::string bytes(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, bytes.data() + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  bytes.resize(got);
  return bytes;
}

std::string read_input_file(const std::string& path, double memory_per_byte) {
  struct stat st {};
  const int fd = open_regular(path, st);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // Files in /proc report size 0 and still hold text: read those up to a small bound. A regular
  // file that grows while it is read (a log being written) is read up to its size at open + 1 MiB.
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t bound = size + (1u << 20);
  require_memory(double(bound) * memory_per_byte, path + " (" + std::to_string(size) + " bytes)", false);
  std::string bytes;
  bytes.reserve(size);
  const size_t chunk = 16u << 20;  // a stop signal is honoured between chunks
  std::string buf(std::min<uint64_t>(chunk, bound), '\0');
  for (;;) {
    // Between full chunks only: a small file (a log, a config) reads whole even while a stop is
    // under way, so the stop paths that read one (drawing loss.svg) still finish. (Not after its
    // one chunk either: the read that finds the end comes after it, and a stop there would end
    // `heed train` in the middle of its evaluation's bookkeeping, without its message.)
    if (bytes.size() >= chunk) check_stop();
    const ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    HEED_CHECK(r >= 0, path, ": read error (", std::strerror(errno), ")");
    if (r == 0) break;
    bytes.append(buf.data(), static_cast<size_t>(r));
    HEED_CHECK(bytes.size() <= bound, path, ": grew past ", bound, " bytes while being read (it had ", size,
               " when opened)");
  }
  return bytes;
}

void write_file_atomically(const std::string& path, std::string_view text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  // O_EXCL creates a new file and never follows a symlink planted under the temporary name; a
  // leftover of an earlier process with this pid (or a planted link) is unlinked, never written.
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(tmp.c_str(), flags, 0644);
  if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0) fd = ::open(tmp.c_str(), flags, 0644);
  HEED_CHECK(fd >= 0, path, ": cannot write (", std::strerror(errno), ")");
  size_t done = 0;
  int err = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    detail::fail(path, ": write failed (", std::strerror(err), ")");
  }
  // The rename itself is durable only once the directory is synced.
  const std::string dir = fs::path(path).parent_path().empty() ? "." : fs::path(path).parent_path().string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void append_line(const std::string& path, const std::string& line) {
  // O_NOFOLLOW: a symlink planted as the log must not make heed append to the link's target.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  HEED_CHECK(fd >= 0, path, ": cannot open for appending (",
             errno == ELOOP ? std::string("it is a symbolic link") : std::string(std::strerror(errno)), ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    detail::fail(path, ": cannot append to it (not a regular file)");
  }
  const std::string text = line + "\n";
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  HEED_CHECK(n == static_cast<ssize_t>(text.size()) && synced, path, ": write failed (",
             std::strerror(n < 0 ? err : ENOSPC), ")");
}

namespace {

void write_unflushed(std::string_view text) {
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), stdout) != text.size())
    throw OutputError(std::string("writing to standard output failed (") + std::strerror(errno) + ")");
}

void flush_stdout() {
  if (std::fflush(stdout) != 0)
    throw OutputError(std::string("writing to standard output failed (") + std::strerror(errno) + ")");
}

}  // namespace

void write_stdout(std::string_view text) {
  write_unflushed(text);
  flush_stdout();
}

void write_stdout_token(std::string_view text) {
  using Clock = std::chrono::steady_clock;
  static const bool tty = ::isatty(STDOUT_FILENO);
  static Clock::time_point last_flush = Clock::now();
  write_unflushed(text);
  if (!tty && Clock::now() - last_flush < std::chrono::milliseconds(100)) return;
  last_flush = Clock::now();
  flush_stdout();
}

void finish_stdout() {
  // ferror catches a failure of an earlier unchecked printf whose error the flush no longer sees.
  const bool failed = std::fflush(stdout) != 0;
  const int err = errno;
  if (failed || std::ferror(stdout))
    throw OutputError(std::string("writing to standard output failed") +
                      (failed ? std::string(" (") + std::strerror(err) + ")" : std::string()));
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const std::string abs = std::filesystem::absolute(path, ec).lexically_normal().string();
  return ec ? path : abs;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  return fs::weakly_canonical(fs::absolute(a, ec), ec) == fs::weakly_canonical(fs::absolute(b, ec), ec);
}

void require_own_output(const std::string& path, const std::string& flag, std::string_view signature) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return;
  std::string head;
  try {
    head = read_input_prefix(path, signature.size());
  } catch (const Error&) {  // a directory, a device...: not ours either
  }
  if (head != signature)
    throw UsageError(flag + " " + path + " exists and is not " +
                     (signature.find("<svg") != std::string_view::npos ? std::string("an SVG drawing heed made")
                                                                      : "a file heed wrote") +
                     "; heed replaces only its own output (choose another " + flag + ")");
}

bool is_utf8(std::string_view s) {
  try {
    decode_utf8(std::string(s), "");
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace heed::cli
