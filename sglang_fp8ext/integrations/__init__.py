"""Entry points for the engines that load real FP8 checkpoints.

* ``transformers``: make a loaded model's block-128 ``FP8Linear`` modules run through
  ``fp8_block_linear`` (offline, no hub kernel).
* ``sglang``: ``w8a8_block_fp8_linear`` with SGLang's signature.
* ``vllm``: a block-FP8 linear op with vLLM's ``apply`` signature.

Each module imports its engine only where it needs it; importing this package imports none.
"""
