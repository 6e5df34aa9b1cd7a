// A progress line on stderr: redrawn in place on a terminal; elsewhere (a log file, CI)
// every update shown is a line of its own.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace flashgen::cli {

class StatusLine {
 public:
  StatusLine() : tty_(::isatty(::fileno(stderr)) != 0) {}
  ~StatusLine() { clear(); }
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;

  bool tty() const { return tty_; }

  // Terminal: replaces the line; otherwise: prints it.
  void show(const std::string& text) {
    if (!tty_) {
      fmt::print(stderr, "{}\n", text);
      return;
    }
    fmt::print(stderr, "\r\033[K{}", text);
    std::fflush(stderr);
    drawn_ = true;
  }

  // Before other output: the drawn line is erased (the next show() draws it again).
  void clear() {
    if (tty_ && drawn_) fmt::print(stderr, "\r\033[K");
    drawn_ = false;
  }

 private:
  bool tty_;
  bool drawn_ = false;
};

}  // namespace flashgen::cli
