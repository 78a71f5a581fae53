#pragma once
// File-level helpers of the records database: the repair lock, moving a damaged file aside and
// making its directory.
#include <string>

namespace tessera::db {

// An exclusive flock on "<db path>.lock", held while one process repairs a damaged database so
// that two processes finding the same damaged file do not both move files aside (the second
// would move the first one's fresh database). Waits up to timeout_ms for another repairer.
class RepairLock {
 public:
  RepairLock(const std::string& db_path, int timeout_ms);
  ~RepairLock();
  RepairLock(const RepairLock&) = delete;
  RepairLock& operator=(const RepairLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Renames <path> to <path>.corrupt-<YYYYmmdd-HHMMSS>[.N] and its WAL file alongside (a WAL left
// next to a fresh database would be replayed into it); deletes the shared-memory index. Returns
// the new name, or "" with *error set.
std::string move_aside(const std::string& path, std::string* error);

// Creates the parent directory of `path` (and its parents). False with *error on failure.
bool make_parent_dir(const std::string& path, std::string* error);

bool file_exists(const std::string& path);

}  // namespace tessera::db
