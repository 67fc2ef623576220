"""nn.TransformerEncoderLayer and TransformerEncoder (python/tmem/_transformer.py): torch's names, values and
gradients against torch 1.13 with its weights loaded (where torch imports); masking and shapes without torch."""
import math
import unittest

import numpy as np

import tmem
import tmem.nn as nn

try:
    import torch
except ImportError:
    torch = None

RNG = np.random.default_rng(8)


class TestWithoutTorch(unittest.TestCase):
    def test_names_shapes_and_masks(self):
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
        self.assertEqual(list(layer.state_dict())[:4], ["self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                                        "self_attn.out_proj.weight", "self_attn.out_proj.bias"])
        self.assertEqual(layer.self_attn.in_proj_weight.shape, (24, 8))
        x = tmem.randn(2, 5, 8)
        self.assertEqual(layer(x).shape, (2, 5, 8))
        self.assertEqual(layer(x[0]).shape, (5, 8))  # unbatched
        # A padded key changes no output; a causal mask keeps earlier positions from later tokens.
        pad = tmem.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]])
        changed = x.clone()
        changed[0, 3:] = 100.0
        np.testing.assert_allclose(layer(x, src_key_padding_mask=pad)[0, :3].detach().numpy(),
                                   layer(changed, src_key_padding_mask=pad)[0, :3].detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        causal = tmem.triu(tmem.full((5, 5), -math.inf), 1)
        late = x.clone()
        late[:, 4] = -50.0
        np.testing.assert_allclose(layer(x, src_mask=causal)[:, :4].detach().numpy(),
                                   layer(late, src_mask=causal)[:, :4].detach().numpy(), rtol=1e-5, atol=1e-6)
        out, weights = layer.self_attn(x, x, x, key_padding_mask=pad)
        np.testing.assert_allclose(weights.sum(-1).detach().numpy(), np.ones((2, 5)), rtol=1e-6)
        self.assertEqual(float(weights[0, :, 3:].abs().max().item()), 0.0)
        stack = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(8))
        self.assertEqual([n for n in stack.state_dict() if n.endswith("linear1.weight")],
                         ["layers.0.linear1.weight", "layers.1.linear1.weight", "layers.2.linear1.weight"])
        first, second = (stack.layers[i].linear1.weight.detach().numpy() for i in (0, 1))
        self.assertFalse(np.shares_memory(first, second))
        with self.assertRaisesRegex(tmem.ValueError, "embed_dim 8 is not divisible by num_heads 3"):
            nn.TransformerEncoderLayer(8, 3)
        with self.assertRaisesRegex(tmem.ValueError, "activation should be relu/gelu, not 'tanh'"):
            nn.TransformerEncoderLayer(8, 2, activation="tanh")


    def test_pickling_and_checks(self):
        """Found by a tester: the layer did not pickle (its activation was a C++ function), and a mask of the
        wrong shape was reshaped instead of refused."""
        import pickle
        for activation in ("gelu", tmem.relu, nn.functional.relu):
            layer = nn.TransformerEncoderLayer(8, 2, 16, activation=activation).eval()
            copy = pickle.loads(pickle.dumps(layer))
            x = tmem.randn(5, 2, 8)
            np.testing.assert_array_equal(copy(x).detach().numpy(), layer(x).detach().numpy())
        layer = nn.TransformerEncoderLayer(8, 2, 16).eval()
        with self.assertRaisesRegex(tmem.ShapeError, "expected key_padding_mask of shape \\[2, 5\\], but got "
                                                     "\\[5, 2\\]"):
            layer(tmem.randn(5, 2, 8), src_key_padding_mask=tmem.zeros(5, 2, dtype=tmem.int64))
        with self.assertRaisesRegex(tmem.ShapeError, "expected attn_mask of shape \\[5, 5\\] or \\[4, 5, 5\\]"):
            layer(tmem.randn(5, 2, 8), src_mask=tmem.zeros(2, 5, 5))
        with self.assertRaisesRegex(tmem.ShapeError, "expected query \\[L, N, 8\\]"):
            layer(tmem.randn(5, 2, 6))
        out, weights = layer.self_attn(tmem.randn(5, 8), tmem.randn(3, 8), tmem.randn(3, 8))  # unbatched
        self.assertEqual((out.shape, weights.shape), ((5, 8), (5, 3)))


@unittest.skipIf(torch is None, "torch does not import (Debian: python3-torch)")
class TestAgainstTorch(unittest.TestCase):
    def compare(self, mine, theirs, shape, **masks):
        self.assertEqual(sorted(mine.state_dict()), sorted(theirs.state_dict()))
        mine.load_state_dict({k: tmem.tensor(v.numpy(), dtype=tmem.float64) for k, v in theirs.state_dict().items()})
        x = RNG.standard_normal(shape)
        xt, xm = torch.tensor(x, requires_grad=True), tmem.tensor(x, dtype=tmem.float64, requires_grad=True)
        mt = {k: torch.tensor(v) for k, v in masks.items()}
        mm = {k: tmem.tensor(v, dtype=tmem.float64 if v.dtype.kind == "f" else tmem.int64) for k, v in masks.items()}
        out_t, out_m = theirs(xt, **mt), mine(xm, **mm)
        np.testing.assert_allclose(out_m.detach().numpy(), out_t.detach().numpy(), rtol=1e-10, atol=1e-12)
        w = RNG.standard_normal(shape)
        (out_t * torch.tensor(w)).sum().backward()
        tmem.sum(out_m * tmem.tensor(w)).backward()
        np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
        grads = dict(theirs.named_parameters())
        for name, p in mine.named_parameters():
            np.testing.assert_allclose(p.grad.numpy(), grads[name].grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)

    def test_layer_and_stack(self):
        causal = np.triu(np.full((5, 5), -np.inf), 1)
        pad = np.zeros((2, 5), bool)
        pad[1, 3:] = True
        for kw, shape, masks in (({}, (5, 2, 8), {}), ({"batch_first": True}, (2, 5, 8), {"src_mask": causal}),
                                 ({"norm_first": True, "activation": "gelu"}, (5, 2, 8), {"src_key_padding_mask": pad}),
                                 ({"batch_first": True, "norm_first": True}, (2, 5, 8),
                                  {"src_mask": np.triu(np.ones((5, 5)), 1).astype(bool), "src_key_padding_mask": pad}),
                                 ({}, (5, 8), {})):
            with self.subTest(**kw):
                self.compare(nn.TransformerEncoderLayer(8, 2, 16, **kw).double().eval(),
                             torch.nn.TransformerEncoderLayer(8, 2, 16, **kw).double().eval(), shape, **masks)
        mine = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2, norm=nn.LayerNorm(8))
        theirs = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2,
                                             norm=torch.nn.LayerNorm(8))
        self.compare(mine.double().eval(), theirs.double().eval(), (2, 5, 8), mask=causal, src_key_padding_mask=pad)


if __name__ == "__main__":
    unittest.main()
