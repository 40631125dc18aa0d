"""Next-token logits in float32 for a model that computes in 16 bits: the likeliest tokens' logits recomputed from
the same hidden state and the same weights, with a float32 product.

A bf16 head rounds every logit to 8 bits of mantissa, 0.06 to 0.125 apart for logits of 8 to 32. Two tokens closer
than that come out equal, and argmax then takes the lower token id, not the likelier token; a token's log-prob is
off by up to a quarter of a nat. Measured for Qwen2.5-Coder-0.5B on 20 HotpotQA train prompts (800 greedy
steps): 1.25 % of the steps chose another token than the float32 product of the same hidden state, and a chosen
token's log-prob differed by 0.006 at the median, 0.11 at the 95th percentile and 0.25 at most. SeaKR's query keeps
the words whose log-prob clears a cut, and FLARE's and DRAGIN's triggers read them too, so those decisions moved
with the rounding.

The 16-bit product still runs over the whole vocabulary (the one read of the table a step needs, so a step costs
what it did); only the top :data:`TOP` of its logits are recomputed: every greedy choice and every top-k sample
(k <= 50 by default) is among them, and the rest weigh in the softmax only through its normaliser.

An opt-in (``load_model(..., exact_logits=True)``), off by default by its decision (benchmarks/exact_logits.py): on
the decision sample every answer it changed became the float32 model's, and SeaKR lost 3.0 F1 there, where bf16's
rounding had happened to help two answers.
"""

from __future__ import annotations

import torch

#: How many of the 16-bit product's top logits are recomputed in float32: above the default top-k of 50, and past
#: any token a rounding of 0.125 could lift into the greedy choice.
TOP = 64


class ExactHead(torch.nn.Module):
    """``head(h)`` -> float32 logits whose top :data:`TOP` are float32 products of ``h`` with ``rows`` (the head's
    weight, or the input embedding holding the same values); the others are the 16-bit head's, widened. ``top = 0``
    turns the recomputation off (the 16-bit logits, widened). It stands where the head stood, so every forward
    (a prefill, a drafted feed, the fast decode step) reads its logits."""

    def __init__(self, head: torch.nn.Module, rows: torch.Tensor, top: int = TOP):
        super().__init__()
        self.head, self.rows, self.top = head, rows, top

    @property
    def weight(self) -> torch.Tensor:  # what transformers and the packing read of an output head
        return self.head.weight

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        out = self.head(h).float()
        if not self.top:
            return out
        top = out.topk(min(self.top, out.shape[-1]), -1).indices  # (..., K)
        exact = (self.rows[top].float() @ h.float().unsqueeze(-1)).squeeze(-1)  # (..., K, d) x (..., d, 1)
        if (bias := getattr(self.head, "bias", None)) is not None:
            exact = exact + bias.float()[top]
        return out.scatter(-1, top, exact)


def install(model, top: int = TOP) -> ExactHead | None:
    """Put an :class:`ExactHead` in place of ``model.lm_head``, before the linears are packed (packing frees a head's
    plain weight). Its rows are the input embedding where that holds the head's values (a tied head, or one a
    conversion copied), else a copy of the head's weight. None (nothing installed) for a model computing in float32,
    or whose head has no plain weight."""
    head = getattr(model, "lm_head", None)
    weight = getattr(head, "weight", None)  # a quantised head's is a method
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or weight.dtype == torch.float32:
        return None
    table = model.get_input_embeddings().weight
    same = table.shape == weight.shape and (table.data_ptr() == weight.data_ptr() or torch.equal(table, weight))
    exact = ExactHead(head, table.detach() if same else weight.detach().clone(), top)
    model.lm_head = exact
    return exact
