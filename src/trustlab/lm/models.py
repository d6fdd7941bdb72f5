"""Small causal language models built from a config, and any local checkpoint loaded offline.

The lab's models are ordinary Hugging Face ``transformers`` models (GPT-2 with learned
positions [1]_, Llama with rotary positions [2]_, Mixtral's sparse mixture of experts [3]_),
built from a :class:`ModelConfig`, never downloaded. A user's own checkpoint directory loads
through the same ``from_pretrained`` path, with ``local_files_only=True``.

References
----------
.. [1] Radford, Wu, Child, Luan, Amodei, Sutskever. "Language Models are Unsupervised
   Multitask Learners". OpenAI, 2019.
.. [2] Touvron et al. "LLaMA: Open and Efficient Foundation Language Models". arXiv:2302.13971,
   2023; Su et al. "RoFormer: Enhanced Transformer with Rotary Position Embedding". 2021.
.. [3] Jiang et al. "Mixtral of Experts". arXiv:2401.04088, 2024.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import ModelError, ParameterError
from trustlab.lm._fields import from_fields

__all__ = ["ARCHITECTURES", "ModelConfig", "build_model", "load_model", "load_tokenizer", "save_model"]

ARCHITECTURES = ("gpt2", "llama", "mixtral")


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a lab model.

    Attributes
    ----------
    arch : {"gpt2", "llama", "mixtral"}
        GPT-2 (learned positions, LayerNorm, GELU MLP), Llama (RoPE, RMSNorm, SwiGLU MLP) or
        Mixtral (Llama's attention with a top-k routed mixture of SwiGLU experts).
    vocab_size : int
        Number of token ids.
    d_model : int
        Width of the residual stream.
    n_layers : int
        Number of transformer blocks.
    n_heads : int
        Attention heads per block (``d_model`` must be a multiple).
    d_ff : int or None
        Hidden width of the MLP (each expert's, for Mixtral); ``None``: ``4 * d_model``.
    max_len : int
        Longest sequence the model accepts (learned positions for GPT-2, RoPE range otherwise).
    n_experts : int
        Experts per block (Mixtral only).
    top_k : int
        Experts each token is routed to (Mixtral only).

    Examples
    --------
    >>> ModelConfig("llama", vocab_size=32, d_model=16, n_layers=1, n_heads=2).d_head
    8
    """

    arch: str
    vocab_size: int
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int | None = None
    max_len: int = 128
    n_experts: int = 4
    top_k: int = 2

    def __post_init__(self) -> None:
        if self.arch not in ARCHITECTURES:
            raise ParameterError(
                f"arch must be one of {', '.join(ARCHITECTURES)}, got {self.arch!r}.", argument="arch"
            )
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "max_len", "n_experts", "top_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ParameterError(f"{name} must be a positive integer, got {value!r}.", argument=name)
        if self.d_model % self.n_heads:
            raise ParameterError(
                f"d_model ({self.d_model}) must be a multiple of n_heads ({self.n_heads}).",
                argument="n_heads",
            )
        if self.top_k > self.n_experts:
            raise ParameterError(
                f"top_k ({self.top_k}) cannot exceed n_experts ({self.n_experts}).", argument="top_k"
            )
        if self.d_ff is not None and (not isinstance(self.d_ff, int) or self.d_ff < 1):
            raise ParameterError(
                f"d_ff must be a positive integer or None, got {self.d_ff!r}.", argument="d_ff"
            )

    @property
    def d_head(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_heads

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """A config from a mapping (e.g. a JSON file's ``"model"`` entry); unknown keys are errors.

        Parameters
        ----------
        data : dict
            The fields of :class:`ModelConfig`.

        Returns
        -------
        ModelConfig
            The validated config.

        Examples
        --------
        >>> ModelConfig.from_dict({"arch": "gpt2", "vocab_size": 10}).n_layers
        2
        """
        return from_fields(cls, data, name="model")

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (JSON-ready).

        Returns
        -------
        dict
            ``{field: value}``.
        """
        return asdict(self)


def _hf_config(config: ModelConfig) -> Any:
    import transformers as tf

    d_ff = config.d_ff or 4 * config.d_model
    common: dict[str, Any] = {
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        "tie_word_embeddings": False,
    }
    if config.arch == "gpt2":
        return tf.GPT2Config(
            vocab_size=config.vocab_size,
            n_embd=config.d_model,
            n_layer=config.n_layers,
            n_head=config.n_heads,
            n_inner=d_ff,
            n_positions=config.max_len,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **common,
        )
    shared: dict[str, Any] = {
        "vocab_size": config.vocab_size,
        "hidden_size": config.d_model,
        "intermediate_size": d_ff,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "num_key_value_heads": config.n_heads,
        "max_position_embeddings": config.max_len,
        **common,
    }
    if config.arch == "llama":
        return tf.LlamaConfig(**shared)
    return tf.MixtralConfig(
        **shared,
        num_local_experts=config.n_experts,
        num_experts_per_tok=config.top_k,
        output_router_logits=True,
    )


@validate_params({"config": [ModelConfig], "seed": [Interval(numbers.Integral, 0, None, closed="left")]})
def build_model(config: ModelConfig, *, seed: int = 0) -> Any:
    """A freshly initialised ``transformers`` causal LM of the given shape (no download).

    Parameters
    ----------
    config : ModelConfig
        Architecture and sizes.
    seed : int, default=0
        Seeds the weight initialisation (the same seed gives the same weights).

    Returns
    -------
    transformers.PreTrainedModel
        ``GPT2LMHeadModel``, ``LlamaForCausalLM`` or ``MixtralForCausalLM``, in eval mode.

    Examples
    --------
    >>> m = build_model(ModelConfig("llama", vocab_size=20, d_model=16, n_layers=1, n_heads=2))
    >>> type(m).__name__
    'LlamaForCausalLM'
    """
    if not isinstance(config, ModelConfig):
        raise ParameterError(
            f"config must be a trustlab.lm.ModelConfig, got {type(config).__name__}.", argument="config"
        )
    import transformers as tf

    hf = _hf_config(config)
    cls = {"gpt2": tf.GPT2LMHeadModel, "llama": tf.LlamaForCausalLM, "mixtral": tf.MixtralForCausalLM}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = cls[config.arch](hf)
    return model.eval()


def _config_json(path: Path) -> dict[str, Any]:
    if not path.is_dir():
        raise ModelError(
            f"path {str(path)!r} is not a directory; give a checkpoint folder holding config.json "
            "and the weights (as written by save_model or transformers' save_pretrained).",
            argument="path",
        )
    cfg = path / "config.json"
    if not cfg.is_file():
        raise ModelError(
            f"path {str(path)!r} has no config.json: it is not a transformers checkpoint; give the "
            "folder that save_pretrained wrote.",
            argument="path",
        )
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(
            f"path {str(path)!r}: config.json is not valid JSON ({exc}).", argument="path"
        ) from exc
    if not isinstance(data, dict):
        raise ModelError(f"path {str(path)!r}: config.json is not a JSON object.", argument="path")
    return data


@contextmanager
def _quiet() -> Iterator[None]:
    """Transformers' progress bars off while loading or saving (a library prints nothing), then restored."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def load_model(path: str | Path) -> Any:
    """A causal LM from a local checkpoint directory, offline (``from_pretrained(path)``).

    Parameters
    ----------
    path : str or Path
        A folder with ``config.json`` and the weights (safetensors or a torch file).

    Returns
    -------
    transformers.PreTrainedModel
        The model, in eval mode.

    Raises
    ------
    ModelError
        The folder is missing, is not a ``transformers`` checkpoint, or holds a model that is
        not a causal LM (e.g. an encoder such as BERT).

    Examples
    --------
    >>> import tempfile
    >>> cfg = ModelConfig("gpt2", vocab_size=20, d_model=16, n_layers=1, n_heads=2)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = save_model(build_model(cfg), d)
    ...     type(load_model(d)).__name__
    'GPT2LMHeadModel'
    """
    path = Path(path)
    data = _config_json(path)
    from transformers import AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = data.get("model_type")
    archs = data.get("architectures") or []
    causal_head = not archs or any("CausalLM" in str(a) or "LMHeadModel" in str(a) for a in archs)
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES or not causal_head:
        raise ModelError(
            f"path {str(path)!r} holds a {model_type!r} model ({', '.join(map(str, archs)) or 'no head'}), "
            "which is not a causal language model; "
            "give a decoder checkpoint (e.g. gpt2, llama, mistral, mixtral, qwen2).",
            argument="path",
        )
    try:
        with _quiet():
            model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True)
    except (
        Exception
    ) as exc:  # transformers raises many types (OSError, ValueError, its own validation errors)
        raise ModelError(
            f"path {str(path)!r} could not be loaded as a causal LM ({' '.join(str(exc).split())[:300]}).",
            argument="path",
        ) from exc
    return model.eval()


def load_tokenizer(path: str | Path) -> Any:
    """The tokenizer saved beside a checkpoint, or ``None`` when the folder has none.

    Parameters
    ----------
    path : str or Path
        A checkpoint folder.

    Returns
    -------
    transformers.PreTrainedTokenizerFast or None
        The tokenizer (loaded offline).

    Examples
    --------
    >>> import tempfile
    >>> model = build_model(ModelConfig("gpt2", vocab_size=8, d_model=8, n_layers=1, n_heads=2))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     folder = save_model(model, tmp)
    ...     (load_tokenizer(folder), (folder / "config.json").is_file())
    (None, True)
    """
    path = Path(path)
    if not (path / "tokenizer.json").is_file():
        return None
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(path), local_files_only=True)


def save_model(model: Any, path: str | Path, tokenizer: Any = None) -> Path:
    """Write a model (safetensors weights + config.json) and its tokenizer into a folder.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model.
    path : str or Path
        Target folder (created).
    tokenizer : transformers.PreTrainedTokenizerFast, optional
        Saved beside the model, so that ``load_tokenizer(path)`` finds it.

    Returns
    -------
    Path
        The folder.

    Examples
    --------
    >>> import tempfile
    >>> model = build_model(ModelConfig("gpt2", vocab_size=8, d_model=8, n_layers=1, n_heads=2))
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     folder = save_model(model, tmp)
    ...     (load_tokenizer(folder), (folder / "config.json").is_file())
    (None, True)
    """
    if not hasattr(model, "save_pretrained"):
        raise ModelError(
            f"model must be a transformers PreTrainedModel, got {type(model).__name__}.", argument="model"
        )
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    with _quiet():
        model.save_pretrained(str(path), safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(str(path))
    return path
