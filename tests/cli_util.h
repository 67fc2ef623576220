// Running the `tmem` program from a test: its exit status and output, in a
// working directory of the test's choosing (runs/ is created there), with an
// optional file size limit that makes its writes fail as on a full disk.
#pragma once
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

namespace tmem::test {

struct CliResult {
  int status = -1;     // exit status; 128 + N when killed by signal N
  std::string output;  // stdout and stderr together
};

/// Runs TMEM_BINARY with `args` in directory `cwd`; with fsize_limit > 0,
/// files it writes cannot grow past that many bytes (writes fail with EFBIG).
inline CliResult run_tmem(const std::vector<std::string>& args, const std::string& cwd, long fsize_limit = 0) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    if (chdir(cwd.c_str()) != 0) _exit(126);
    if (fsize_limit > 0) {
      std::signal(SIGXFSZ, SIG_IGN);
      rlimit lim;
      getrlimit(RLIMIT_FSIZE, &lim);
      lim.rlim_cur = static_cast<rlim_t>(fsize_limit);
      setrlimit(RLIMIT_FSIZE, &lim);
    }
    setenv("OMP_WAIT_POLICY", "passive", 1);
    std::vector<char*> argv;
    std::string prog = TMEM_BINARY;
    argv.push_back(prog.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(prog.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  CliResult r;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) r.output.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

/// The options of a diagnostic training run small enough for a test (a
/// second or less): no-harm, base, 3 steps at batch 2, d = 16, one thread.
inline std::vector<std::string> tiny_train_args(const std::string& name) {
  return {"train", "no-harm", "--method", "base", "--steps", "3", "--batch", "2", "--eval-batches", "1",
          "--dim", "16", "--layers", "1", "--heads", "2", "--threads", "1", "--name", name};
}

/// A fresh, empty working directory for a CLI test under the temp folder.
inline std::string fresh_cli_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

}  // namespace tmem::test
