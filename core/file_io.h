// Checked file output: every file tmem writes goes through here, so a full
// disk, a read-only directory or a failed rename is an IOError naming the
// file, never a silently empty or stale result.
//   AtomicFileWriter / write_file_atomic: whole files (results, configs,
//     plots, checkpoints). The bytes go to a temporary file in the target's
//     directory, which is flushed, fsync'ed and renamed over the target;
//     every step is checked, and on any failure the temporary file is
//     removed and the old target is left as it was.
//   AppendFileWriter: files that grow while a run goes on (gradient dumps),
//     each write checked and fsync'ed, so a crash keeps what was written.
// And the one JSON reader: parse_json, through which every JSON text tmem
// reads (configs, checkpoint metadata, safetensors headers, gradient dumps,
// results) is parsed with its nesting depth limited.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tmem {

/// Writes one file atomically (see the file comment). Usage: write() any
/// number of times, then commit(); destroying the writer without commit()
/// discards the temporary file and leaves the target untouched.
class AtomicFileWriter {
 public:
  /// Creates the temporary file next to `path` (next to the file a symbolic
  /// link at path names: the link stays, its file is replaced, as torch.save
  /// writes through links). The replaced file's permissions are kept. Throws
  /// IOError naming path when its directory is missing or not writable, or
  /// when path is a directory, a device, a FIFO or a socket (a rename would
  /// put a plain file in place of /dev/null).
  explicit AtomicFileWriter(std::string path);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  /// Removes the temporary file unless commit() succeeded.
  ~AtomicFileWriter();
  /// Appends n bytes. Throws IOError naming the target on a failed write
  /// (full disk, file size limit, I/O error).
  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  /// Flushes and fsyncs the temporary file, renames it over the target and
  /// fsyncs the directory. Throws IOError naming the target and the failed
  /// step; the old target then survives. Calling it twice is an error.
  void commit();
  const std::string& path() const { return path_; }

 private:
  void fail(const std::string& step, int err);
  std::string path_, target_, tmp_;  // as given, the file replaced (a link's), the temporary file
  int fd_ = -1;
  bool committed_ = false;
};

/// Throws ValueError naming `who` and path when path holds a NUL byte: every
/// system call would stop there and use another file (Python's open() says
/// "embedded null byte"). Every file function of tmem checks it first.
void check_path(const std::string& path, const std::string& who);

/// Writes `data` to `path` through an AtomicFileWriter. Throws IOError naming
/// path when any step fails; the old file at path then survives unchanged.
void write_file_atomic(const std::string& path, std::string_view data);

/// Appends `data` to `path` (the file is created when absent): reads the old
/// bytes and writes old + new with write_file_atomic, so a failure leaves the
/// old file whole. Throws IOError naming path.
void append_file_atomic(const std::string& path, std::string_view data);

/// A file written piece by piece while a run goes on: opened for appending
/// (or truncated), every write checked and followed by fsync. Throws IOError
/// naming the file on any failure.
class AppendFileWriter {
 public:
  /// Opens `path`; with `truncate`, drops its old contents, else appends
  /// after them. Throws IOError naming path when it cannot be opened or is
  /// not a regular file.
  AppendFileWriter(std::string path, bool truncate);
  AppendFileWriter(const AppendFileWriter&) = delete;
  AppendFileWriter& operator=(const AppendFileWriter&) = delete;
  ~AppendFileWriter();
  /// Writes every byte of s, then fsyncs. Throws IOError naming the file.
  void write(std::string_view s);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

/// Creates directory `dir` (and its parents) when missing and checks that a
/// 4 KiB file can be created, written and renamed in it, so a run learns before it
/// trains that its results could not be saved. Throws IOError naming dir.
void ensure_writable_dir(const std::string& dir);

/// Parses `text` as one JSON value. Containers (arrays, objects) may nest at
/// most `max_depth` levels ("[[1]]" is 2): the depth is checked while the
/// parser runs, before a deeper value is built, so a hostile file (100,000
/// '[') neither overflows the stack nor eats memory. Throws IOError naming
/// `source` (a file, "file: entry") when the text is not JSON (with the line
/// and column, the offending text cut by printable), holds a NUL byte (the
/// parser would stop there and ignore the rest) or nests deeper than
/// max_depth, or repeats a key within one object (nlohmann would keep the
/// last value silently).
nlohmann::json parse_json(std::string_view text, const std::string& source, int max_depth = 64);

/// The largest JSON file tmem reads (configs, results, losses): 256 MiB.
constexpr uintmax_t kMaxJsonFileBytes = uintmax_t{256} << 20;

/// Reads and parses the JSON file at `path` (parse_json, the source named
/// "<who> <path>", e.g. who "train: config file"). Throws IOError naming
/// who and path when it does not
/// exist, is not a regular file (a directory; a FIFO or /dev/zero would
/// block or never end), is larger than kMaxJsonFileBytes, cannot be read,
/// or is not JSON.
nlohmann::json read_json_file(const std::string& path, const std::string& who);

}  // namespace tmem
