#pragma once
// A read-only memory-mapped file: checkpoints are read in place, never copied whole.
#include <cstddef>
#include <cstdint>
#include <string>

namespace luminal {

class MappedFile {
 public:
  MappedFile() = default;
  static MappedFile open(const std::string& path);  // Error if missing or unreadable
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace luminal
