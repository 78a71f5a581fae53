#include "tune/worker_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "util/check.h"

namespace tessera::tune {

namespace {

// The parent polls in slices this long, so a child that died while another process still holds
// a copy of the pipe's write end (a sibling forked meanwhile) is noticed by waitpid.
constexpr int kPollSliceMs = 100;

using Clock = std::chrono::steady_clock;

}  // namespace

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGABRT:
      return "SIGABRT";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGPIPE:
      return "SIGPIPE";
    default:
      return "signal " + std::to_string(sig);
  }
}

bool write_all(int fd, const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

WorkerProcess::WorkerProcess(const std::function<void(int)>& child) {
  int fds[2];
  TESSERA_CHECK(::pipe2(fds, O_CLOEXEC) == 0) << "worker pipe: " << std::strerror(errno);
  pid_ = ::fork();
  if (pid_ < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    TESSERA_CHECK(false) << "cannot fork a worker process: " << std::strerror(err);
  }
  if (pid_ == 0) {
    ::close(fds[0]);
    child(fds[1]);
    ::_exit(kChildReturnedStatus);
  }
  ::close(fds[1]);  // the parent keeps only the read end: the child's exit ends the stream
  read_fd_ = fds[0];
}

WorkerProcess::~WorkerProcess() {
  kill_and_reap();
  if (read_fd_ >= 0) ::close(read_fd_);
}

bool WorkerProcess::take_line(std::string* line) {
  const size_t end = buffer_.find('\n');
  if (end == std::string::npos) return false;
  line->assign(buffer_, 0, end);
  buffer_.erase(0, end + 1);
  return true;
}

void WorkerProcess::reap(int options) {
  if (reaped_) return;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, options);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    reaped_ = true;
    status_ = status;
    status_known_ = true;
  } else if (r < 0) {
    reaped_ = true;  // ECHILD: reaped elsewhere (SIGCHLD ignored); how it ended is unknown
  }
}

WorkerProcess::Read WorkerProcess::next_line(double timeout_s, std::string* line) {
  if (take_line(line)) return Read::kLine;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(std::max(0.0, timeout_s)));
  while (!eof_) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0 && !reaped_) return Read::kTimedOut;
    // Once the child is reaped, only what is buffered in the pipe is left to read.
    const int slice = reaped_ ? 0 : static_cast<int>(std::min<int64_t>(left, kPollSliceMs));
    pollfd p{read_fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, slice);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      if (reaped_) break;
      reap(WNOHANG);
      continue;
    }
    char chunk[1 << 14];
    const ssize_t n = ::read(read_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof_ = true;
      break;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
    if (take_line(line)) return Read::kLine;
  }
  eof_ = true;
  return take_line(line) ? Read::kLine : Read::kEnded;
}

void WorkerProcess::kill_and_reap() {
  if (pid_ <= 0 || reaped_) return;
  ::kill(pid_, SIGKILL);
  killed_by_us_ = true;
  reap(0);
}

std::string WorkerProcess::wait_exit() {
  reap(0);
  if (!status_known_) return "ended (its exit status is unknown)";
  if (WIFEXITED(status_)) {
    const int code = WEXITSTATUS(status_);
    return code == 0 ? "" : "exited with status " + std::to_string(code);
  }
  if (WIFSIGNALED(status_)) {
    const int sig = WTERMSIG(status_);
    if (sig == SIGKILL && !killed_by_us_) return "was killed (SIGKILL: out of memory?)";
    return "crashed with " + signal_name(sig);
  }
  return "ended (status " + std::to_string(status_) + ")";
}

}  // namespace tessera::tune
