#pragma once
// A forked child process that reports to its parent over a pipe, one line per message. The
// parent reads line by line with a timeout; the child is killed (SIGKILL) and reaped when the
// object goes away, so no child outlives it, even when the parent unwinds with an exception.
// POSIX only (fork, pipe, poll, waitpid).
#include <sys/types.h>

#include <functional>
#include <string>

namespace tessera::tune {

class WorkerProcess {
 public:
  // Forks. The child closes the pipe's read end and runs `child(write_fd)`, which must end the
  // process with _exit() (if it returns, the child _exit()s with kChildReturnedStatus). Throws
  // tessera::Error when the pipe or the fork fails.
  explicit WorkerProcess(const std::function<void(int write_fd)>& child);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  static constexpr int kChildReturnedStatus = 120;

  enum class Read { kLine, kEnded, kTimedOut };
  // The next line the child wrote (without its '\n'): kLine. kEnded: the child closed the pipe
  // or exited and every complete line was read. kTimedOut: no complete line within timeout_s.
  Read next_line(double timeout_s, std::string* line);
  // Kills the child (if it still runs) and reaps it.
  void kill_and_reap();
  // Reaps the child (waiting for it) and says how it ended: "" for exit status 0, else e.g.
  // "crashed with SIGSEGV", "was killed (SIGKILL: out of memory?)", "exited with status 3".
  std::string wait_exit();

  pid_t pid() const { return pid_; }

 private:
  bool take_line(std::string* line);
  void reap(int options);

  pid_t pid_ = -1;
  int read_fd_ = -1;
  bool reaped_ = false;
  bool eof_ = false;
  int status_ = 0;
  bool status_known_ = false;
  bool killed_by_us_ = false;
  std::string buffer_;
};

// Writes all of `text` to `fd` (the child's side); false when the parent is gone.
bool write_all(int fd, const std::string& text);

// "SIGSEGV" for SIGSEGV, ..., "signal N" for others.
std::string signal_name(int sig);

}  // namespace tessera::tune
