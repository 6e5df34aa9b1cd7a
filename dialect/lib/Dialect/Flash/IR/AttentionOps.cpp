// flash.attention and flash.attention_grad: verifiers and canonicalisation.
// Layout (DESIGN.md): q (batch, seqlen_q, heads_q, head_dim), k/v (batch,
// seqlen_k, heads_kv, head_dim), o like q, lse f32 (batch, heads_q, seqlen_q).
#include "LaunchParameters.h"
#include "flashgen/Dialect/Flash/IR/Dialect.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"

namespace mlir::flash {

namespace {
enum Dim { kBatch = 0, kSeqlen = 1, kHeads = 2, kHeadDim = 3 };
const char* const kDimNames[] = {"batch", "seqlen", "heads", "head_dim"};

RankedTensorType ranked(Value v) { return cast<RankedTensorType>(v.getType()); }

std::string dimText(int64_t d) { return ShapedType::isDynamic(d) ? "?" : std::to_string(d); }
}  // namespace

// Dimension `dim` of `a` and `b` must agree where both are static.
static LogicalResult verifySameDim(Operation* op, Dim dim, StringRef aName, RankedTensorType a, StringRef bName,
                                   RankedTensorType b) {
  const int64_t x = a.getDimSize(dim), y = b.getDimSize(dim);
  if (ShapedType::isDynamic(x) || ShapedType::isDynamic(y) || x == y) return success();
  return op->emitOpError() << kDimNames[dim] << " of " << aName << " (" << x << ") differs from " << bName << " (" << y
                           << ")";
}

// q, k, v: one element type, one static head_dim, one batch; k and v one seqlen_k
// and heads_kv; heads_q a multiple of heads_kv (multi- and grouped-query attention).
static LogicalResult verifyInputs(Operation* op, RankedTensorType q, RankedTensorType k, RankedTensorType v) {
  for (auto [name, t] : {std::pair{"key", k}, std::pair{"value", v}})
    if (t.getElementType() != q.getElementType())
      return op->emitOpError() << name << " element type " << t.getElementType() << " differs from query element type "
                               << q.getElementType();
  for (auto [name, t] : {std::pair{"query", q}, std::pair{"key", k}, std::pair{"value", v}})
    if (t.isDynamicDim(kHeadDim)) return op->emitOpError() << "head_dim of " << name << " must be static";
  if (failed(verifySameDim(op, kHeadDim, "key", k, "query", q)) ||
      failed(verifySameDim(op, kHeadDim, "value", v, "query", q)) ||
      failed(verifySameDim(op, kBatch, "key", k, "query", q)) ||
      failed(verifySameDim(op, kBatch, "value", v, "query", q)) ||
      failed(verifySameDim(op, kSeqlen, "value", v, "key", k)) ||
      failed(verifySameDim(op, kHeads, "value", v, "key", k)))
    return failure();
  const int64_t headsQ = q.getDimSize(kHeads), headsKv = k.getDimSize(kHeads);
  if (!ShapedType::isDynamic(headsQ) && !ShapedType::isDynamic(headsKv) && (headsKv == 0 || headsQ % headsKv != 0))
    return op->emitOpError() << "heads of query (" << headsQ << ") must be a multiple of heads of key and value ("
                             << headsKv << ")";
  return success();
}

// `t` (named `name`) must be a tensor like `like`: same element type, compatible shape.
static LogicalResult verifyLike(Operation* op, StringRef name, RankedTensorType t, StringRef likeName,
                                RankedTensorType like) {
  if (t.getElementType() == like.getElementType() && succeeded(verifyCompatibleShape(t, like))) return success();
  return op->emitOpError() << name << " must be shaped and typed like " << likeName << " (" << like << "), got " << t;
}

// lse: f32 (batch, heads_q, seqlen_q) of q.
static LogicalResult verifyLse(Operation* op, RankedTensorType lse, RankedTensorType q) {
  const int64_t expected[] = {q.getDimSize(kBatch), q.getDimSize(kHeads), q.getDimSize(kSeqlen)};
  if (succeeded(verifyCompatibleShape(lse.getShape(), expected))) return success();
  return op->emitOpError() << "lse must be f32 (batch, heads_q, seqlen_q) = (" << dimText(expected[0]) << ", "
                           << dimText(expected[1]) << ", " << dimText(expected[2]) << "), got " << lse;
}

template <typename ProblemOp>
static LogicalResult verifyProblemAttributes(ProblemOp op) {
  return verifyLaunchParameters(op, op.getWindow(), op.getSoftcap(), op.getSoftmaxScale());
}

LogicalResult AttentionOp::verify() {
  const RankedTensorType q = ranked(getQuery());
  if (failed(verifyInputs(*this, q, ranked(getKey()), ranked(getValue()))) ||
      failed(verifyLike(*this, "out", ranked(getOut()), "query", q)) || failed(verifyLse(*this, ranked(getLse()), q)))
    return failure();
  return verifyProblemAttributes(*this);
}

LogicalResult AttentionGradOp::verify() {
  const RankedTensorType q = ranked(getQuery()), k = ranked(getKey()), v = ranked(getValue());
  if (failed(verifyInputs(*this, q, k, v)) || failed(verifyLike(*this, "out", ranked(getOut()), "query", q)) ||
      failed(verifyLse(*this, ranked(getLse()), q)) ||
      failed(verifyLike(*this, "grad_out", ranked(getGradOut()), "query", q)) ||
      failed(verifyLike(*this, "grad_query", ranked(getGradQuery()), "query", q)) ||
      failed(verifyLike(*this, "grad_key", ranked(getGradKey()), "key", k)) ||
      failed(verifyLike(*this, "grad_value", ranked(getGradValue()), "value", v)))
    return failure();
  return verifyProblemAttributes(*this);
}

// Rewrites of the mask that keep every (query, key) pair it admits, so the
// problem then needs a simpler kernel. With d = seqlen_k - seqlen_q, query i
// sees keys i + d - left <= j <= i + d + right (-1: that side unbounded):
//  - left >= seqlen_k - 1 excludes no key (the lowest bound, at i = seqlen_q - 1,
//    is <= 0): left becomes -1;
//  - right >= seqlen_q - 1 excludes no key (the highest bound, at i = 0, is
//    >= seqlen_k - 1): right becomes -1; so does any right >= 0 under causal,
//    whose bound j <= i + d is the tighter one;
//  - [-1, 0] is exactly causal;
//  - [-1, -1] is no window.
template <typename ProblemOp>
static LogicalResult canonicalizeMask(ProblemOp op, PatternRewriter& rewriter) {
  std::optional<ArrayRef<int64_t>> window = op.getWindow();
  if (!window || window->size() != 2) return failure();
  int64_t left = (*window)[0], right = (*window)[1];
  bool causal = op.getCausal();
  const int64_t seqlenQ = ranked(op.getQuery()).getDimSize(kSeqlen);
  const int64_t seqlenK = ranked(op.getKey()).getDimSize(kSeqlen);

  if (left > -1 && !ShapedType::isDynamic(seqlenK) && left >= seqlenK - 1) left = -1;
  if (right > -1 && (causal || (!ShapedType::isDynamic(seqlenQ) && right >= seqlenQ - 1))) right = -1;
  if (!causal && left == -1 && right == 0) {
    causal = true;
    right = -1;
  }
  const bool noWindow = left == -1 && right == -1;
  if (!noWindow && left == (*window)[0] && right == (*window)[1] && causal == op.getCausal()) return failure();
  rewriter.modifyOpInPlace(op, [&] {
    op.setCausal(causal);
    if (noWindow)
      op.removeWindowAttr();
    else
      op.setWindowAttr(rewriter.getDenseI64ArrayAttr({left, right}));
  });
  return success();
}

LogicalResult AttentionOp::canonicalize(AttentionOp op, PatternRewriter& rewriter) {
  return canonicalizeMask(op, rewriter);
}

LogicalResult AttentionGradOp::canonicalize(AttentionGradOp op, PatternRewriter& rewriter) {
  return canonicalizeMask(op, rewriter);
}

}  // namespace mlir::flash
