"""flashgen as a Hugging Face transformers attention implementation: a small model built
from a config (random weights, no network) gives the logits and gradients of "sdpa"."""
import unittest

import support

try:
    import torch
    import transformers
except ImportError:
    torch = transformers = None
    print("flashgen-test: skipping: torch or transformers is not installed")

if transformers is not None:
    import flashgen.transformers


@unittest.skipIf(transformers is None, "torch or transformers is not installed")
class TransformersTest(support.SeededTestCase):
    def compare(self, config, seqlen):
        torch.manual_seed(self.seed)
        name = flashgen.transformers.register()
        reference = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=name)
        model.load_state_dict(reference.state_dict())
        tokens = torch.randint(0, config.vocab_size, (2, seqlen), generator=torch.Generator().manual_seed(self.seed))
        results = []
        for m in (reference, model):
            out = m(input_ids=tokens, labels=tokens)
            out.loss.backward()
            grads = {n: p.grad for n, p in m.named_parameters() if "q_proj" in n or "k_proj" in n}
            results.append((out.logits.detach(), out.loss.detach(), grads))
        (ref_logits, ref_loss, ref_grads), (logits, loss, grads) = results
        torch.testing.assert_close(logits, ref_logits, rtol=1e-4, atol=1e-4, msg=lambda m: f"logits: {m} {self.where()}")
        torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-5)
        self.assertEqual(grads.keys(), ref_grads.keys())
        for name in grads:
            torch.testing.assert_close(grads[name], ref_grads[name], rtol=1e-3, atol=1e-4,
                                       msg=lambda m: f"grad of {name}: {m} {self.where()}")

    def test_llama_gqa(self):
        config = transformers.LlamaConfig(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
        self.compare(config, seqlen=37)

    def test_llama_left_padded_batch(self):
        """A padded batch (an attention_mask with zeros) runs through packed sequences: the logits of
        the real tokens are sdpa's."""
        config = transformers.LlamaConfig(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
        torch.manual_seed(self.seed)
        name = flashgen.transformers.register()
        reference = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=name)
        model.load_state_dict(reference.state_dict())
        tokens = torch.randint(0, config.vocab_size, (3, 21), generator=torch.Generator().manual_seed(self.seed))
        mask = torch.ones_like(tokens)
        mask[1, :6] = mask[2, :15] = 0
        ref_logits, logits = (m(input_ids=tokens, attention_mask=mask).logits.detach() for m in (reference, model))
        real = mask.bool()
        torch.testing.assert_close(logits[real], ref_logits[real], rtol=1e-4, atol=1e-4,
                                   msg=lambda m: f"logits: {m} {self.where()}")

    def test_mistral_sliding_window(self):
        config = transformers.MistralConfig(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=1, sliding_window=9,
                                            max_position_embeddings=64)
        self.compare(config, seqlen=29)


if __name__ == "__main__":
    unittest.main()
