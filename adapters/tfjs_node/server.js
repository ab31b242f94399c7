// The TensorFlow.js side of adapters/tfjs.py. One JSON request per line on stdin, one answer per
// line on stdout: {"op", "args"} -> {"outputs"} or {"error"}. Tensors travel as base64 float32.
// Written in the document's own idiom: tf.variable, tf.matMul(q, k, false, true), tf.div, tf.softmax.
// Backend: WebAssembly with SIMD (XNNPACK matmuls), ~20x the pure-JS CPU backend on the GPT-2-sized
// case (measured); TFJS_BACKEND=cpu selects the pure-JS one.
// @tensorflow/tfjs, not tfjs-core alone: only the full package's bundle registers the gradient
// functions that tf.grad, tf.variableGrads and tf.train.sgd need (tfjs-core's own are ES modules).
const tf = require("@tensorflow/tfjs");
require("@tensorflow/tfjs-backend-wasm");
const readline = require("readline");

const fromWire = (a) => {
  if (a === null || typeof a !== "object" || !("b64" in a)) return a;
  const bytes = Buffer.from(a.b64, "base64");
  if (a.dtype === "bool") return tf.tensor(Array.from(bytes, (b) => b !== 0), a.shape, "bool");
  return tf.tensor(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4), a.shape, "float32");
};
const toWire = (t) => {
  if (!(t instanceof tf.Tensor)) return t;
  const data = t.dtype === "bool" ? Float32Array.from(t.dataSync(), Number) : Float32Array.from(t.dataSync());
  return { dtype: "float32", shape: t.shape, b64: Buffer.from(data.buffer).toString("base64") };
};

// tf.matMul takes equal ranks: a batch [B, T, D] times one [D, H] matrix goes through 2-D.
const project = (x, W) => {
  if (x.rank === 1) return tf.squeeze(tf.matMul(tf.expandDims(x, 0), W), [0]);
  if (x.rank === 2) return tf.matMul(x, W);
  const [B, T, D] = x.shape;
  return tf.reshape(tf.matMul(tf.reshape(x, [B * T, D]), W), [B, T, W.shape[1]]);
};
// The wasm backend multiplies one pair of matrices with XNNPACK, but a batch of them, or a transposed
// operand, ~10-50x slower (measured, 4.22.0): a batch goes through 2-D products, transposes made explicit.
const bmm = (a, b, transposeB = false) => {
  if (a.rank === 2) return tf.matMul(a, transposeB ? tf.transpose(b) : b);
  const lead = a.shape.slice(0, -2);
  if (lead.every((n) => n === 1)) { // a batch of one is one matmul: tf.grad through tf.unstack of a length-1 axis fails (4.22, measured)
    const m = bmm(tf.reshape(a, a.shape.slice(-2)), tf.reshape(b, b.shape.slice(-2)), transposeB);
    return tf.reshape(m, [...lead, ...m.shape]);
  }
  const flat = (t) => tf.unstack(tf.reshape(t, [-1, ...t.shape.slice(-2)]));
  const bs = flat(b);
  const out = flat(a).map((m, i) => tf.matMul(m, transposeB ? tf.transpose(bs[i]) : bs[i]));
  return tf.reshape(tf.stack(out), [...a.shape.slice(0, -2), ...out[0].shape]);
};
const causalHidden = (T) => tf.equal(tf.linalg.bandPart(tf.ones([T, T]), -1, 0), 0); // above the diagonal
const maskedSoftmax = (scores, dK, hidden) => {
  let scaled = tf.div(scores, Math.sqrt(dK));
  if (hidden) {
    const everywhere = hidden.shape.join() === scaled.shape.join() ? hidden : tf.broadcastTo(hidden, scaled.shape);
    scaled = tf.where(everywhere, tf.fill(scaled.shape, -Infinity), scaled);
  }
  return tf.softmax(scaled, -1);
};

function attend(x, Wq, Wk, Wv, hidden) {
  const Q = project(x, Wq);
  const K = project(x, Wk);
  const V = project(x, Wv);
  const scores = bmm(Q, K, true); // tf.matMul(q, k, false, true)
  const weights = maskedSoftmax(scores, K.shape[K.rank - 1], hidden);
  return { query: Q, key: K, value: V, scores, d_k: K.shape[K.rank - 1], weights, context: bmm(weights, V) };
}

function selfAttentionV1(x, w_query, w_key, w_value, trainable) {
  const Wq = tf.variable(w_query, trainable), Wk = tf.variable(w_key, trainable), Wv = tf.variable(w_value, trainable);
  const out = attend(x, Wq, Wk, Wv).context;
  [Wq, Wk, Wv].forEach((v) => v.dispose());
  return out;
}

const ops = {
  version: () => `tfjs-core ${tf.version_core}, backend ${tf.getBackend()}`,
  create_parameter: ({ d_in, d_out, seed }) => {
    const parameter = tf.variable(tf.randomUniform([d_in, d_out], 0, 1, "float32", seed)); // not tf.randomNormal
    return { parameter, trainable: parameter.trainable };
  },
  project: ({ x, w }) => project(x, w),
  transposed_matmul: ({ q, k }) => tf.matMul(q, k, false, true),
  scale: ({ scores, d_k }) => tf.div(scores, Math.sqrt(d_k)),
  softmax: ({ scores }) => tf.softmax(scores, -1),
  blend: ({ weights, v }) => tf.matMul(weights, v),
  dot_columns: ({ x, w }) => tf.stack(Array.from({ length: w.shape[1] }, (_, j) => tf.dot(x, tf.squeeze(tf.slice(w, [0, j], [-1, 1]), [1])))),
  attention: ({ x, w_query, w_key, w_value }) => attend(x, w_query, w_key, w_value),
  self_attention_v1: ({ x, w_query, w_key, w_value }) => ({
    context: selfAttentionV1(x, w_query, w_key, w_value, true),
    context_no_grad: selfAttentionV1(x, w_query, w_key, w_value, false),
  }),
  parameters: ({ d_in, d_out }) => {
    const vars = [0, 1, 2].map(() => tf.variable(tf.randomUniform([d_in, d_out])));
    const out = { count: vars.reduce((n, v) => n + v.size, 0), trainable: vars.map((v) => v.trainable) };
    vars.forEach((v) => v.dispose());
    return out;
  },
  causal_attention: ({ x, w_query, w_key, w_value }) => {
    const { weights, context } = attend(x, w_query, w_key, w_value, causalHidden(x.shape[x.rank - 2]));
    return { weights, context };
  },
  masked_attention: ({ x, w_query, w_key, w_value, mask }) => {
    const { weights, context } = attend(x, w_query, w_key, w_value, mask);
    return { weights, context };
  },
  decode_attention: ({ x, w_query, w_key, w_value, start }) => {
    const T = x.shape[x.rank - 2], Tq = T - start;
    const K = project(x, w_key), V = project(x, w_value);
    const Q = project(tf.slice(x, [...x.shape.slice(0, -2).map(() => 0), start, 0], [...x.shape.slice(0, -2), Tq, -1]), w_query);
    // The query at absolute position p = start + i may see keys 0..p: the band moves right by `start`.
    const hidden = tf.equal(tf.linalg.bandPart(tf.ones([Tq, T]), -1, start), 0);
    const context = bmm(maskedSoftmax(bmm(Q, K, true), K.shape[K.rank - 1], hidden), V);
    // Token by token: append the new token's key and value to the cache, attend over all of it.
    const at = (t, p, n) => tf.slice(t, [...t.shape.slice(0, -2).map(() => 0), p, 0], [...t.shape.slice(0, -2), n, -1]);
    let kCache = at(K, 0, start), vCache = at(V, 0, start);
    const steps = [];
    for (let p = start; p < T; p++) {
      const token = at(x, p, 1);
      kCache = tf.concat([kCache, project(token, w_key)], -2);
      vCache = tf.concat([vCache, project(token, w_value)], -2);
      steps.push(bmm(maskedSoftmax(bmm(project(token, w_query), kCache, true), K.shape[K.rank - 1], null), vCache));
    }
    return { context, stepwise: tf.concat(steps, -2) };
  },
  grouped_attention: ({ x, w_query, w_key, w_value, num_heads, num_kv_heads, causal }) => {
    const H = w_query.shape[1] / num_heads, T = x.shape[x.rank - 2], group = num_heads / num_kv_heads;
    const lead = x.shape.slice(0, -1);
    const perm = [...Array(lead.length - 1).keys(), lead.length, lead.length - 1, lead.length + 1];
    const split = (t, n) => tf.unstack(tf.reshape(tf.transpose(tf.reshape(t, [...lead, n, H]), perm), [-1, T, H]));
    const Qs = split(project(x, w_query), num_heads), Ks = split(project(x, w_key), num_kv_heads), Vs = split(project(x, w_value), num_kv_heads);
    const hidden = causal ? causalHidden(T) : null;
    // Qs is batch-major: entry b * N + n is batch b, query head n, which reads K/V head floor(n / group).
    const kv = (i) => Math.floor(i / num_heads) * num_kv_heads + Math.floor((i % num_heads) / group);
    const heads = Qs.map((q, i) => bmm(maskedSoftmax(bmm(q, Ks[kv(i)], true), H, hidden), Vs[kv(i)]));
    return tf.reshape(tf.stack(heads), [...lead.slice(0, -1), num_heads, T, H]);
  },
  // Training, in the document's idiom: tf.variable, tf.variableGrads / tf.grad, tf.train.sgd.
  // L = sum(context * g); v2 weights arrive in nn.Linear's [d_out, d_in] and are used as x @ W^T.
  gradients: ({ x, w_query, w_key, w_value, g, form }) => {
    const asKernel = (W) => (form === "v2" ? tf.transpose(W) : W);
    const loss = (xx, ws) => tf.sum(tf.mul(attend(xx, ...ws.map(asKernel)).context, g));
    const vars = [w_query, w_key, w_value].map((w) => tf.variable(w));
    const { grads } = tf.variableGrads(() => loss(x, vars), vars);
    const grad_x = tf.grad((xx) => loss(xx, vars))(x);
    const out = { grad_w_query: grads[vars[0].name], grad_w_key: grads[vars[1].name], grad_w_value: grads[vars[2].name], grad_x };
    vars.forEach((v) => v.dispose());
    return out;
  },
  sgd_step: ({ x, w_query, w_key, w_value, g, lr }) => {
    const vars = [w_query, w_key, w_value].map((w) => tf.variable(w));
    tf.train.sgd(lr).minimize(() => tf.sum(tf.mul(attend(x, ...vars).context, g)), false, vars);
    const [wq, wk, wv] = vars.map((v) => v.clone());
    vars.forEach((v) => v.dispose());
    return { w_query: wq, w_key: wk, w_value: wv };
  },
  // An additive mask, 0 where a key is visible and the fill where hidden, added to the scores.
  mask_additive: ({ x, w_query, w_key, w_value, mask, fill }) => {
    const value = { neg_inf: -Infinity, large_negative: -1e9, dtype_min: -3.4028234663852886e38 }[fill];
    const Q = project(x, w_query), K = project(x, w_key), V = project(x, w_value);
    const additive = tf.where(mask, tf.fill(mask.shape, value), tf.zeros(mask.shape));
    const scaled = tf.add(tf.div(bmm(Q, K, true), Math.sqrt(K.shape[K.rank - 1])), additive);
    return bmm(tf.softmax(scaled, -1), V);
  },
  dropout: ({ weights, p, seed }) => ({ dropout_eval: weights, dropout_train: tf.dropout(weights, p, null, seed) }),
  multi_head_attention: ({ x, w_query, w_key, w_value, w_out, num_heads, causal }) => {
    const dOut = w_query.shape[1], H = dOut / num_heads, T = x.shape[x.rank - 2];
    const lead = x.shape.slice(0, -1); // [.., T]
    const perm = [...Array(lead.length - 1).keys(), lead.length, lead.length - 1, lead.length + 1];
    const split = (t) => tf.transpose(tf.reshape(t, [...lead, num_heads, H]), perm); // (.., N, T, H)
    const [Q, K, V] = [w_query, w_key, w_value].map((w) => split(project(x, w)));
    // Head by head, as 2-D matrices: the wasm backend's batched products, broadcast masks and stacks
    // of [N, T, T] scores cost ~10x its 2-D kernels (measured on the GPT-2-sized case).
    const hidden = causal ? causalHidden(T) : null;
    const each = (t) => tf.unstack(tf.reshape(t, [-1, T, H]));
    const [Qs, Ks, Vs] = [Q, K, V].map(each);
    const heads = tf.reshape(tf.stack(Qs.map((q, i) => bmm(maskedSoftmax(bmm(q, Ks[i], true), H, hidden), Vs[i]))), Q.shape);
    const merged = tf.reshape(tf.transpose(heads, perm), [...lead, dOut]);
    return { heads, context: project(merged, w_out) };
  },
  draw: ({ distribution, n, seed }) =>
    distribution === "uniform" ? tf.randomUniform([n], 0, 1, "float32", seed) : tf.randomNormal([n], 0, 1, "float32", seed),
  initial_weights: ({ d_in, d_out, seed }) => {
    const [w_query, w_key, w_value] = [0, 1, 2].map((i) => tf.variable(tf.randomUniform([d_in, d_out], 0, 1, "float32", seed + i)));
    return { w_query, w_key, w_value };
  },
  knobs_removed: ({ x }) => {
    const d = x.shape[x.rank - 1], eye = tf.eye(d);
    const plain = (q, k, v, scaled) => tf.matMul(tf.softmax(scaled ? tf.div(tf.matMul(q, k, false, true), Math.sqrt(d)) : tf.matMul(q, k, false, true), -1), v);
    const [q, k, v] = [eye, eye, eye].map((w) => project(x, w));
    return { part6: plain(x, x, x, false), part6_scaled: plain(x, x, x, true),
             part7_identity: attend(x, eye, eye, eye).context, part7_identity_unscaled: plain(q, k, v, false) };
  },
};

const wire = (out) => {
  if (out instanceof tf.Tensor || typeof out !== "object" || out === null || Array.isArray(out)) return toWire(out);
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, toWire(v)]));
};

tf.setBackend(process.env.TFJS_BACKEND || "wasm").then((ok) => {
  if (!ok) throw new Error(`TensorFlow.js backend ${process.env.TFJS_BACKEND || "wasm"} did not initialise`);
  readline.createInterface({ input: process.stdin }).on("line", (line) => {
    const { op, args } = JSON.parse(line);
    let reply;
    try {
      reply = tf.tidy(() => ({ outputs: wire(ops[op](Object.fromEntries(Object.entries(args).map(([k, v]) => [k, fromWire(v)])))) }));
    } catch (e) {
      reply = { error: `${e.name}: ${e.message}` };
    }
    process.stdout.write(JSON.stringify(reply) + "\n");
  });
});
