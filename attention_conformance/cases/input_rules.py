"""What an op asks of its inputs together, beyond each one's kind: checked when a spec loads, so that a case no
correct adapter could meet is refused with its field named, never run."""

from attention_conformance.cases import yaml_values


def _shape(value):
    return (
        value["shape"] if isinstance(value, dict) else yaml_values.shape_of(value) if isinstance(value, list) else None
    )


def problem(op, inputs):
    """'field ...: what is wrong' for the first rule the inputs break, or None."""
    return (
        _heads_divide(inputs)
        or _even_heads(op, inputs)
        or _trailing_padding(op, inputs)
        or _leading_padding(op, inputs)
        or _one_packed_row(inputs)
    )


def _heads_divide(inputs):
    """num_heads must split the projection width evenly, where the width is known before goldens are
    read; num_kv_heads must divide num_heads, and w_key must be num_kv_heads heads of the same size."""
    heads, shape = inputs.get("num_heads"), _shape(inputs.get("w_query"))
    if heads is not None and shape and shape[-1] % heads:
        return f"field 'inputs.num_heads': {heads} heads do not divide the width {shape[-1]} of w_query"
    kv = inputs.get("num_kv_heads")
    if kv is not None and heads is not None:
        if heads % kv:
            return f"field 'inputs.num_kv_heads': {kv} does not divide num_heads {heads}"
        k_shape = _shape(inputs.get("w_key"))
        if shape and k_shape and k_shape[-1] * heads != shape[-1] * kv:
            return f"field 'inputs.w_key': width {k_shape[-1]} is not {kv} heads of w_query's {shape[-1]} / {heads}"
    return None


def _even_heads(op, inputs):
    """A decoder and packed documents turn each head whole: its dims must pair up."""
    shape = _shape(inputs.get("w_query"))
    if (
        op in ("decoder_attention", "varlen_attention", "varlen_flag", "llama4_attention")
        and shape
        and (shape[-1] // inputs["num_heads"]) % 2
    ):
        return (
            f"field 'inputs.w_query': heads of {shape[-1] // inputs['num_heads']} dims, where RoPE needs an even width"
        )
    return None


def _trailing_padding(op, inputs):
    """Key lengths say how many keys are real: the padding must follow them, and a row keep one."""
    rows = inputs.get("padding")
    if op != "key_padding_flag" or not isinstance(rows, list):
        return None
    for row in rows:
        real = row.count(False)
        if real == 0 or any(row[:real]):
            return "field 'inputs.padding': each row's real keys come first, at least one, then its padding"
    return None


def _leading_padding(op, inputs):
    """Llama 4's chunks hold a token at least and start at a row's first real token: its padding is left padding, and a
    row keeps a token."""
    if op not in ("chunked_attention", "chunked_flag"):
        return None
    if inputs.get("chunk") == 0:
        return "field 'inputs.chunk': 0, where chunked attention needs chunks of 1 token or more"
    rows = inputs.get("padding")
    if not isinstance(rows, list):
        return None
    for row in rows:
        padded = row.count(True)
        if padded == len(row) or not all(row[:padded]):
            return "field 'inputs.padding': each row's padding comes first (left padding), then at least one real token"
    return None


def _one_packed_row(inputs):
    """Packed documents fill one row: x [1, T, D] with cu_seqlens ending at T."""
    offsets, shape = inputs.get("cu_seqlens"), _shape(inputs.get("x"))
    if offsets is None or not shape:
        return None
    if len(shape) != 3 or shape[0] != 1:
        return f"field 'inputs.x': shape {shape}; packed documents are one row [1, T, D]"
    if offsets[-1] != shape[1]:
        return f"field 'inputs.cu_seqlens': ends at {offsets[-1]}, where x holds {shape[1]} tokens (T must be the last)"
    return None
