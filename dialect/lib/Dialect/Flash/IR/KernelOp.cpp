// flash.kernel: a symbol whose attributes are exactly a flashgen KernelSpec. The
// attributes are the fields of compiler/spec_fields.h, under their names: an i32 for an
// integer, a unit attribute for a flag (present when set), a type for the dtype and the
// value's name for another enum (pass, arch). Nothing here names a field.
#include "compiler/mlir_text.h"
#include "compiler/spec_fields.h"
#include "flashgen/Dialect/Flash/IR/Dialect.h"
#include "llvm/ADT/StringSet.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

namespace mlir::flash {

flashgen::DType toDType(Type t) {
  if (t.isF16()) return flashgen::DType::f16;
  if (t.isBF16()) return flashgen::DType::bf16;
  return flashgen::DType::f32;
}

namespace {

Type toType(MLIRContext* ctx, flashgen::DType t) {
  switch (t) {
    case flashgen::DType::f16: return Float16Type::get(ctx);
    case flashgen::DType::bf16: return BFloat16Type::get(ctx);
    case flashgen::DType::f32: return Float32Type::get(ctx);
    case flashgen::DType::i32: return IntegerType::get(ctx, 32);  // index tensors; no kernel has it
  }
  return Float32Type::get(ctx);
}

// A field value as its attribute (a null attribute: a flag that is not set) and back.
Attribute toAttr(MLIRContext* ctx, int v) { return IntegerAttr::get(IntegerType::get(ctx, 32), v); }
Attribute toAttr(MLIRContext* ctx, bool v) { return v ? UnitAttr::get(ctx) : Attribute(); }
Attribute toAttr(MLIRContext* ctx, flashgen::DType t) { return TypeAttr::get(toType(ctx, t)); }
template <typename E>
Attribute toAttr(MLIRContext* ctx, E v) {
  return StringAttr::get(ctx, flashgen::EnumSpelling<E>::print(v));
}

std::optional<int> fromAttr(Attribute a, int*) {
  auto i = dyn_cast_or_null<IntegerAttr>(a);
  if (!i || !i.getType().isSignlessInteger(32)) return std::nullopt;
  return static_cast<int>(i.getInt());
}
std::optional<bool> fromAttr(Attribute a, bool*) {
  if (a && !isa<UnitAttr>(a)) return std::nullopt;
  return static_cast<bool>(a);
}
std::optional<flashgen::DType> fromAttr(Attribute a, flashgen::DType*) {
  auto t = dyn_cast_or_null<TypeAttr>(a);
  if (!t || !(t.getValue().isF16() || t.getValue().isBF16() || t.getValue().isF32())) return std::nullopt;
  return toDType(t.getValue());
}
template <typename E>
std::optional<E> fromAttr(Attribute a, E*) {
  auto s = dyn_cast_or_null<StringAttr>(a);
  if (!s) return std::nullopt;
  return flashgen::EnumSpelling<E>::parse(s.getValue());
}

// The constraint an attribute of type T must satisfy, for the verifier's message.
template <typename T>
std::string constraint() {
  if constexpr (std::is_same_v<T, int>)
    return "32-bit signless integer attribute";
  else if constexpr (std::is_same_v<T, bool>)
    return "unit attribute";
  else if constexpr (std::is_same_v<T, flashgen::DType>)
    return "type attribute of f16, bf16 or f32";
  else
    return "string attribute naming a " + std::string(flashgen::EnumSpelling<T>::what) + ": " +
           flashgen::enum_values<T>();
}

template <typename Field>
using ValueOf = typename std::decay_t<Field>::value_type;

// The names of the fields in braces: the attribute list of the parser's messages.
std::string attributeNames() {
  std::vector<std::string> names;
  flashgen::for_each_spec_field([&](const auto& f) {
    if (f.mlir == flashgen::MlirPlace::attribute) names.push_back(f.name);
  });
  return flashgen::one_of(names);
}

}  // namespace

flashgen::KernelSpec KernelOp::getSpec() {
  flashgen::KernelSpec s;
  flashgen::for_each_spec_field([&](const auto& f) {
    using T = ValueOf<decltype(f)>;
    if (auto v = fromAttr((*this)->getAttr(f.name), static_cast<T*>(nullptr))) s.*f.member = *v;
  });
  return s;
}

Type KernelOp::getElementType() { return toType(getContext(), getSpec().dtype); }

void KernelOp::build(OpBuilder& b, OperationState& state, StringRef name, const flashgen::KernelSpec& spec) {
  state.addAttribute(getSymNameAttrName(state.name), b.getStringAttr(name));
  flashgen::for_each_spec_field([&](const auto& f) {
    if (Attribute a = toAttr(b.getContext(), spec.*f.member)) state.addAttribute(f.name, a);
  });
}

// One text for every printer of a kernel: compiler/mlir_text.cpp.
void KernelOp::print(OpAsmPrinter& p) {
  p << ' ';
  p.printSymbolName(getSymName());
  p << ' ' << flashgen::mlir_kernel_body(getSpec());
}

// @name <pass> for <arch> {head_dim = 128, dtype = bf16, block_m = .., ..., causal, ...}
// (flags optional, keys in any order)
ParseResult KernelOp::parse(OpAsmParser& parser, OperationState& result) {
  MLIRContext* ctx = parser.getContext();
  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name), result.attributes)) return failure();

  // An enum value spelled as a keyword (the pass, the arch, ...).
  auto parseEnum = [&](const auto& f) -> ParseResult {
    using E = ValueOf<decltype(f)>;
    const SMLoc at = parser.getCurrentLocation();
    StringRef word;
    if (parser.parseKeyword(&word)) return failure();
    const std::optional<E> value = flashgen::EnumSpelling<E>::parse(word);
    if (!value)
      return parser.emitError(at) << "unknown " << flashgen::EnumSpelling<E>::what << " '" << word << "', expected "
                                  << flashgen::enum_values<E>();
    result.addAttribute(f.name, toAttr(ctx, *value));
    return success();
  };
  // The keywords around `for`: <pass> for <arch>.
  auto parseHead = [&](flashgen::MlirPlace place) {
    ParseResult parsed = failure();
    flashgen::for_each_spec_field([&](const auto& f) {
      if constexpr (std::is_enum_v<ValueOf<decltype(f)>>)
        if (f.mlir == place) parsed = parseEnum(f);
    });
    return parsed;
  };
  if (parseHead(flashgen::MlirPlace::before_for) || parser.parseKeyword("for") ||
      parseHead(flashgen::MlirPlace::after_for))
    return failure();

  llvm::StringSet<> seen;
  auto parseEntry = [&]() -> ParseResult {
    const SMLoc keyAt = parser.getCurrentLocation();
    StringRef key;
    if (parser.parseKeyword(&key)) return failure();
    if (!seen.insert(key).second) return parser.emitError(keyAt) << "'" << key << "' is given twice";
    std::optional<ParseResult> parsed;
    flashgen::for_each_spec_field([&](const auto& f) {
      using T = ValueOf<decltype(f)>;
      if (f.mlir != flashgen::MlirPlace::attribute || key != f.name) return;
      if constexpr (std::is_same_v<T, bool>) {
        result.addAttribute(f.name, UnitAttr::get(ctx));
        parsed = success();
      } else if (parser.parseEqual()) {
        parsed = failure();
      } else if constexpr (std::is_same_v<T, flashgen::DType>) {
        Type type;  // any type: the verifier names the ones a kernel takes
        parsed = parser.parseType(type);
        if (succeeded(*parsed)) result.addAttribute(f.name, TypeAttr::get(type));
      } else if constexpr (std::is_enum_v<T>) {
        parsed = parseEnum(f);
      } else {
        int32_t value = 0;
        parsed = parser.parseInteger(value);
        if (succeeded(*parsed)) result.addAttribute(f.name, toAttr(ctx, static_cast<int>(value)));
      }
    });
    if (!parsed)
      return parser.emitError(keyAt) << "unknown kernel attribute '" << key << "', expected " << attributeNames();
    return *parsed;
  };
  const SMLoc at = parser.getCurrentLocation();
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, parseEntry)) return failure();
  std::optional<ParseResult> missing;
  flashgen::for_each_spec_field([&](const auto& f) {
    if (missing || f.mlir != flashgen::MlirPlace::attribute || std::is_same_v<ValueOf<decltype(f)>, bool>) return;
    if (!seen.contains(f.name)) missing = parser.emitError(at) << "kernel attribute '" << f.name << "' is missing";
  });
  return missing ? *missing : success();
}

// Every field's attribute has its kind; the rules are then KernelSpec's
// (compiler/kernel_spec.cpp): the runtime, `flashgen dump` and this verifier accept
// exactly the same kernels.
LogicalResult KernelOp::verify() {
  bool wellFormed = true;
  flashgen::for_each_spec_field([&](const auto& f) {
    using T = ValueOf<decltype(f)>;
    const Attribute a = (*this)->getAttr(f.name);
    if (!a && !std::is_same_v<T, bool>) {
      emitOpError() << "requires attribute '" << f.name << "'";
      wellFormed = false;
    } else if (!fromAttr(a, static_cast<T*>(nullptr))) {
      emitOpError() << "attribute '" << f.name << "' failed to satisfy constraint: " << constraint<T>();
      wellFormed = false;
    }
  });
  if (!wellFormed) return failure();
  const std::vector<std::string> problems = getSpec().problems();
  for (const std::string& problem : problems) emitOpError() << problem;
  return success(problems.empty());
}

}  // namespace mlir::flash
