#include "db/db_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>

namespace tessera::db {

RepairLock::RepairLock(const std::string& db_path, int timeout_ms) {
  const std::string lock_path = db_path + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if ((errno != EWOULDBLOCK && errno != EINTR) || std::chrono::steady_clock::now() > deadline) {
      ::close(fd);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fd_ = fd;
}

RepairLock::~RepairLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string move_aside(const std::string& path, std::string* error) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::string target = path + ".corrupt-" + stamp;
  for (int n = 1; file_exists(target) && n < 1000; ++n) {
    target = path + ".corrupt-" + stamp + "." + std::to_string(n);
  }
  if (::rename(path.c_str(), target.c_str()) != 0) {
    if (error) *error = "cannot rename " + path + " to " + target + ": " + std::strerror(errno);
    return "";
  }
  // The WAL belongs to the damaged file: keep it with it (it may hold the newest records).
  if (file_exists(path + "-wal")) ::rename((path + "-wal").c_str(), (target + "-wal").c_str());
  ::unlink((path + "-shm").c_str());  // an index of the WAL, rebuilt from scratch by SQLite
  return target;
}

bool make_parent_dir(const std::string& path, std::string* error) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return true;
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  std::error_code is_dir_ec;
  if (ec && !std::filesystem::is_directory(parent, is_dir_ec)) {
    if (error) *error = "cannot create " + parent.string() + ": " + ec.message();
    return false;
  }
  return true;
}

}  // namespace tessera::db
