// flashgen-opt: mlir-opt for the `flash` dialect (MlirOptMain + a registry).
//   flashgen-opt attention.mlir --canonicalize --flash-select-kernels=arch=sm_90a
//   flashgen-opt kernels.mlir --flash-emit-cuda=dir=out/
// Before MLIR parses a file, it is checked here: an empty file is an error (MLIR would take
// it as an empty module and succeed silently), and brackets nested deeper than
// kMaxNesting are refused (MLIR's recursive-descent parser overflows the stack on
// thousands of nested regions).
#include <fstream>
#include <iterator>
#include <string>

#include "flashgen/Dialect/Flash/IR/Dialect.h"
#include "flashgen/Dialect/Flash/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

namespace {

constexpr int kMaxNesting = 200;  // the flash dialect's files nest a few levels

// The deepest nesting of ( [ { outside comments and string literals; -1 for only
// whitespace and comments.
int nesting_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool content = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') content = true;
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
  }
  return content ? deepest : -1;
}

// An error message for an input MLIR should not be given, or "" (stdin is left to MLIR).
std::string check_input(const std::string& path) {
  if (path == "-") return "";
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";  // MLIR reports a missing or unreadable file itself
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const int depth = nesting_depth(text);
  if (depth < 0) return path + ": the file holds no MLIR (empty, or only comments), expected a module of flash ops";
  if (depth > kMaxNesting)
    return path + ": brackets nest " + std::to_string(depth) + " levels deep, expected at most " +
           std::to_string(kMaxNesting) + " (deeper nesting would overflow the parser's stack)";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::flash::FlashDialect, mlir::func::FuncDialect>();
  mlir::flash::registerFlashPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  const auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "flashgen-opt: the flash attention dialect and its passes\n", registry);
  if (const std::string error = check_input(input); !error.empty()) {
    llvm::errs() << "flashgen-opt: " << error << "\n";
    return 1;
  }
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, input, output, registry));
}
