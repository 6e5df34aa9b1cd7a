// flash.kernel against the field table: the text compiler/mlir_text.cpp prints parses
// back to the same spec and prints the same again, for any values of every field.
#include <gtest/gtest.h>

#include <random>

#include "compiler/mlir_text.h"
#include "flashgen/Dialect/Flash/IR/Dialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "tests/compiler/spec_samples.h"
#include "tests/test_seed.h"

namespace flashgen {
namespace {

class KernelOpTest : public ::testing::Test {
 protected:
  KernelOpTest() { context_.loadDialect<mlir::flash::FlashDialect>(); }

  // The module's one kernel op, parsed from `text` (verified when `verify`).
  mlir::OwningOpRef<mlir::ModuleOp> parse(const std::string& text, bool verify) {
    return mlir::parseSourceString<mlir::ModuleOp>(text, mlir::ParserConfig(&context_, verify));
  }

  static std::string print(mlir::ModuleOp module) {
    std::string text;
    llvm::raw_string_ostream out(text);
    module.print(out, mlir::OpPrintingFlags().assumeVerified());  // invalid specs print too
    return text + "\n";  // what MlirOptMain adds (mlir_module's last line)
  }

  mlir::MLIRContext context_;
};

TEST_F(KernelOpTest, TextRoundTripsAnySpec) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 300; ++i) {
    const KernelSpec s = testing_support::random_spec(rng);
    const std::string text = mlir_module({s});
    auto module = parse(text, /*verify=*/false);
    ASSERT_TRUE(module) << text;
    auto kernel = *module->getOps<mlir::flash::KernelOp>().begin();
    EXPECT_EQ(kernel.getSpec(), s) << text;
    EXPECT_EQ(print(*module), text);
  }
}

TEST_F(KernelOpTest, ValidSpecsVerifyAndBuildTheSameOp) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 50; ++i) {
    const KernelSpec s = testing_support::random_valid_spec(rng);
    auto parsed = parse(mlir_module({s}), /*verify=*/true);
    ASSERT_TRUE(parsed) << mlir_kernel(s);

    mlir::OpBuilder b(&context_);
    mlir::OwningOpRef<mlir::ModuleOp> built = mlir::ModuleOp::create(b.getUnknownLoc());
    b.setInsertionPointToEnd(built->getBody());
    auto kernel = b.create<mlir::flash::KernelOp>(b.getUnknownLoc(), s.uri(), s);
    EXPECT_TRUE(mlir::succeeded(mlir::verify(*built)));
    EXPECT_EQ(kernel.getSpec(), s);
    EXPECT_EQ(print(*built), print(*parsed));
  }
}

}  // namespace
}  // namespace flashgen
