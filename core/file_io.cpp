#include "tmem/core/file_io.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tmem/core/error.h"

namespace tmem {

namespace {

std::string parent_dir(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

[[noreturn]] void throw_io(const std::string& path, const std::string& step, int err) {
  throw IOError("cannot write " + path + ": " + step + " failed (" + std::strerror(err) + ")");
}

// Writes all n bytes to fd, retrying short writes and EINTR; false with errno
// set on failure.
bool write_fully(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (w == 0) {
      errno = EIO;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// fsync of a directory, so a rename in it survives a crash. Some file
// systems cannot fsync directories (EINVAL); that is not a write failure.
void sync_dir(const std::string& dir, const std::string& path) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_io(path, "opening its directory " + dir, errno);
  const int rc = ::fsync(fd), err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL && err != ENOTSUP) throw_io(path, "fsync of its directory " + dir, err);
}

std::atomic<uint64_t> tmp_counter{0};

// The file a chain of symbolic links at path names, whether it exists or not
// (std::filesystem::weakly_canonical stops at a dangling link, so the link
// itself was replaced); path itself when it is no link. Throws IOError naming
// path when a link cannot be read or the chain does not end (40 hops, as
// Linux's ELOOP).
std::string link_target(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p.string();
    std::error_code ec;
    const fs::path next = fs::read_symlink(p, ec);
    if (ec) throw IOError("cannot write " + path + ": its link cannot be followed (" + ec.message() + ")");
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  throw IOError("cannot write " + path + ": too many levels of symbolic links");
}

// A temporary file's name next to target: target's name cut so that the
// suffix fits in a file name's 255 bytes (NAME_MAX), so a name the system
// takes is never refused for its temporary file.
std::string temporary_name(const std::string& target) {
  const std::string suffix = ".tmp." + std::to_string(::getpid()) + "." + std::to_string(tmp_counter++);
  const size_t slash = target.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const size_t keep = std::min(target.size() - base, size_t{255} - suffix.size());
  return target.substr(0, base + keep) + suffix;
}

}  // namespace

void check_path(const std::string& path, const std::string& who) {
  const size_t nul = path.find('\0');
  check<ValueError>(nul == std::string::npos, who, ": the path \"", printable(path), "\" holds a NUL byte (at ", nul,
                    "), where the system would cut it");
}

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)), target_(path_) {
  check<IOError>(!path_.empty(), "cannot write a file with an empty name");
  check_path(path_, "cannot write");
  // A symbolic link stays a link: the file it names is the one replaced, or
  // made when it does not exist yet (as open() follows a dangling link).
  target_ = link_target(path_);
  struct stat st;
  const bool exists = ::stat(target_.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) throw IOError("cannot write " + path_ + ": it is a directory");
  // A rename would put a plain file where a device or a FIFO was (/dev/null).
  if (exists && !S_ISREG(st.st_mode))
    throw IOError("cannot write " + path_ + ": not a regular file (a device, a FIFO or a socket)");
  for (int attempt = 0; fd_ < 0; ++attempt) {
    tmp_ = temporary_name(target_);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt >= 100)) {
      const int err = errno;
      tmp_.clear();
      throw_io(path_, "creating a temporary file in " + parent_dir(target_), err);
    }
  }
  // The replaced file keeps its permissions (a 0600 checkpoint stays 0600).
  if (exists && ::fchmod(fd_, st.st_mode & 07777) != 0) fail("fchmod", errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::fail(const std::string& step, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  throw_io(path_, step, err);
}

void AtomicFileWriter::write(const void* data, size_t n) {
  check<IOError>(fd_ >= 0 && !committed_, "cannot write ", path_, ": the writer is closed");
  if (!write_fully(fd_, static_cast<const char*>(data), n)) fail("write", errno);
}

void AtomicFileWriter::commit() {
  check<IOError>(fd_ >= 0 && !committed_, "cannot write ", path_, ": the writer is closed");
  if (::fsync(fd_) != 0) fail("fsync", errno);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("close", errno);
  if (std::rename(tmp_.c_str(), target_.c_str()) != 0) fail("rename from " + tmp_, errno);
  committed_ = true;
  sync_dir(parent_dir(target_), path_);
}

void write_file_atomic(const std::string& path, std::string_view data) {
  AtomicFileWriter w(path);
  w.write(data);
  w.commit();
}

void append_file_atomic(const std::string& path, std::string_view data) {
  check_path(path, "cannot append");
  std::string old;
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    check<IOError>(std::filesystem::is_regular_file(path, ec), "cannot append to ", path, ": not a regular file");
    std::ifstream in(path, std::ios::binary);
    check<IOError>(static_cast<bool>(in), "cannot append to ", path, ": it cannot be read");
    old.assign(std::istreambuf_iterator<char>(in), {});
    check<IOError>(!in.bad(), "cannot append to ", path, ": reading it failed");
  }
  old.append(data);
  write_file_atomic(path, old);
}

AppendFileWriter::AppendFileWriter(std::string path, bool truncate) : path_(std::move(path)) {
  check_path(path_, "cannot write");
  struct stat st;
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw IOError("cannot write " + path_ + ": not a regular file");
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : O_APPEND), 0666);
  if (fd_ < 0) throw_io(path_, "open", errno);
}

AppendFileWriter::~AppendFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFileWriter::write(std::string_view s) {
  if (!write_fully(fd_, s.data(), s.size())) throw_io(path_, "write", errno);
  if (::fsync(fd_) != 0) throw_io(path_, "fsync", errno);
}

void ensure_writable_dir(const std::string& dir) {
  check_path(dir, "cannot create the directory");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IOError("cannot create the directory " + dir + ": " + ec.message());
  check<IOError>(std::filesystem::is_directory(dir, ec), dir, " is not a directory");
  const std::string probe = dir + "/.tmem-write-check";
  try {
    write_file_atomic(probe, std::string(4096, '.'));  // a block: a disk with a few bytes left fails too
  } catch (const IOError& e) {
    throw IOError("the directory " + dir + " is not writable: " + e.what());
  }
  std::filesystem::remove(probe, ec);
}

nlohmann::json parse_json(std::string_view text, const std::string& source, int max_depth) {
  using nlohmann::json;
  // `depth` counts the containers open around the event's value, so a
  // container opening at depth max_depth would be level max_depth + 1.
  // A key given twice in one object: nlohmann keeps the last silently (a
  // config's second "lr", a safetensors header's second tensor of a name).
  std::vector<std::set<std::string>> keys;  // of each object open, innermost last
  const json::parser_callback_t limit = [&](int depth, json::parse_event_t event, json& parsed) {
    if ((event == json::parse_event_t::array_start || event == json::parse_event_t::object_start) &&
        depth >= max_depth)
      throw IOError(source + ": JSON nested deeper than " + std::to_string(max_depth) + " levels");
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.back().insert(parsed.get<std::string>()).second)
      throw IOError(source + ": the key \"" + printable(parsed.get<std::string>()) + "\" appears twice in one object");
    return true;
  };
  // nlohmann's parser stops at a NUL byte and ignores what follows it
  // ("{}\0garbage" parsed as {}); JSON text cannot hold a raw NUL.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    throw IOError(source + ": not valid JSON (a NUL byte at offset " + std::to_string(nul) + ")");
  try {
    return json::parse(text.begin(), text.end(), limit);
  } catch (const json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line ..., column ...: <why>; last read:
    // '<text>'", or out_of_range.406 for a number too large for a double (found by fuzz_grad_dump).
    std::string why = e.what();
    if (const size_t at = why.find("] "); at != std::string::npos) why.erase(0, at + 2);
    throw IOError(source + ": not valid JSON (" + printable(why, 160) + ")");
  }
}

nlohmann::json read_json_file(const std::string& path, const std::string& who) {
  namespace fs = std::filesystem;
  check_path(path, who);
  const std::string source = who + " " + path;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  check<IOError>(st.type() != fs::file_type::not_found, source, " does not exist");
  check<IOError>(fs::is_regular_file(st), source, " is not a regular file");
  const uintmax_t size = fs::file_size(path, ec);
  check<IOError>(!ec, source, " cannot be read: ", ec.message());
  check<IOError>(size <= kMaxJsonFileBytes, source, " holds ", size, " bytes, more than the ", kMaxJsonFileBytes >> 20,
                 " MiB a JSON file of tmem's may");
  std::ifstream in(path, std::ios::binary);
  check<IOError>(static_cast<bool>(in), source, " cannot be opened");
  std::string text(std::istreambuf_iterator<char>(in), {});
  check<IOError>(!in.bad(), source, ": reading it failed");
  return parse_json(text, source);
}

}  // namespace tmem
