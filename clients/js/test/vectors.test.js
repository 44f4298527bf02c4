"use strict";
// Conformance with PROTOCOL.md's test vectors (rlbridge/protocol/vectors.json): every vector's
// bytes decode into its fields and its fields encode into the same bytes.
const test = require("node:test");
const assert = require("node:assert/strict");
const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");
const {
  MessageType: T, ErrorCode, Float64, ProtocolError, encodeMessage, decodeEnvelope, decodeValue,
  encodeValue, readReward,
} = require("../lib/protocol");

const VECTORS = path.resolve(__dirname, "../../../rlbridge/protocol/vectors.json");
const vectors = JSON.parse(fs.readFileSync(VECTORS, "utf8"));

function valueFromFields(fields) {
  return {
    ints: fields.ints,
    doubles: fields.doubles,
    chars: fields.chars,
    arrays: fields.arrays.map((a) => {
      let data;
      if (a.data_hex !== undefined) data = Uint8Array.from(Buffer.from(a.data_hex, "hex"));
      else { // "byte i is i mod 256"
        const count = a.shape.reduce((x, y) => x * y, 1) * Number(a.dtype.slice(2));
        data = Uint8Array.from({ length: count }, (_, i) => i % 256);
      }
      return { dtype: a.dtype, shape: a.shape, data };
    }),
  };
}

// PROTOCOL.md's bodies: one field travels bare, several as an array in the fields' order.
// "answer": a query's reply whole (PROTOCOL.md section 15).
const BARE_FIELDS = new Set(["task_spec", "text", "reason", "reward", "observation", "action",
  "answer"]);
const VALUE_FIELDS = new Set(["observation", "action", "last_action"]);
// JSON cannot say that 1.0 is a float; these fields are float64 on the wire.
const FLOAT_FIELDS = new Set(["reward", "total_reward"]);

function isBare(fields) {
  const keys = Object.keys(fields);
  return keys.length === 1 && BARE_FIELDS.has(keys[0]);
}

function encodeField(key, value, frames) {
  if (VALUE_FIELDS.has(key) && value !== null) return encodeValue(valueFromFields(value), frames);
  if (FLOAT_FIELDS.has(key)) return new Float64(value);
  return value;
}

/** The body of a vector, built from its fields. */
function bodyFromFields(fields, frames) {
  const entries = Object.entries(fields);
  if (entries.length === 0) return null;
  if (isBare(fields)) return encodeField(entries[0][0], entries[0][1], frames);
  return entries.map(([key, value]) => encodeField(key, value, frames));
}

function checkField(raw, key, want, frames) {
  if (VALUE_FIELDS.has(key) && want !== null) sameValue(decodeValue(raw, frames), want);
  else if (FLOAT_FIELDS.has(key)) assert.equal(readReward(raw), want);
  else assert.deepEqual(raw, want);
}

function sameValue(got, fields) {
  const want = valueFromFields(fields);
  assert.deepEqual(got.ints, want.ints);
  assert.deepEqual(got.doubles, want.doubles);
  assert.equal(got.chars, want.chars);
  assert.equal(got.arrays.length, want.arrays.length);
  got.arrays.forEach((array, i) => {
    assert.equal(array.dtype, want.arrays[i].dtype);
    assert.deepEqual(array.shape, want.arrays[i].shape);
    assert.deepEqual(Buffer.from(array.data), Buffer.from(want.arrays[i].data));
  });
}

for (const v of vectors.messages) {
  test(`encode ${v.name}`, () => {
    const frames = [];
    const body = bodyFromFields(v.fields, frames);
    const [head, ...extra] = encodeMessage(v.type, v.seq, v.episode, body, frames);
    assert.equal(Buffer.from(head).toString("hex"), v.hex);
    assert.deepEqual(extra.map((f) => ({
      length: f.length, sha256: crypto.createHash("sha256").update(f).digest("hex"),
    })), v.frames);
  });

  test(`decode ${v.name}`, () => {
    const frames = [];
    bodyFromFields(v.fields, frames); // the extra frames, rebuilt from their rule
    const message = decodeEnvelope(Buffer.from(v.hex, "hex"), frames);
    assert.deepEqual([message.version, message.type, message.seq, message.episode],
      [v.version, v.type, v.seq, v.episode]);
    const entries = Object.entries(v.fields);
    if (entries.length === 0) assert.equal(message.body, null);
    else if (isBare(v.fields)) checkField(message.body, entries[0][0], entries[0][1], frames);
    else {
      assert.equal(message.body.length, entries.length);
      entries.forEach(([key, want], i) => checkField(message.body[i], key, want, frames));
    }
  });
}

for (const v of vectors.invalid) {
  test(`reject ${v.name}`, () => {
    assert.throws(() => decodeEnvelope(Buffer.from(v.hex, "hex")),
      (err) => err instanceof ProtocolError && err.code === v.error_code);
  });
}

// This library knows the batched types (PROTOCOL.md section 16) but does not batch: their
// envelopes decode, and their bodies are plain msgpack that encodes back into the same bytes.
for (const v of vectors.batch.messages) {
  test(`batch envelope ${v.name}`, () => {
    const frames = v.frames.map((f) => Uint8Array.from({ length: f.length }, (_, i) => i % 256));
    frames.forEach((frame, i) => assert.equal(
      crypto.createHash("sha256").update(frame).digest("hex"), v.frames[i].sha256));
    const message = decodeEnvelope(Buffer.from(v.hex, "hex"), frames);
    assert.deepEqual([message.version, message.type, message.seq, message.episode],
      [v.version, v.type, v.seq, v.episode]);
    assert.equal(T[v.type_name], v.type);
    const [head] = encodeMessage(message.type, message.seq, message.episode, message.body);
    assert.equal(Buffer.from(head).toString("hex"), v.hex);
  });
}

test("whole-number doubles still travel as float64", () => {
  const [head] = encodeMessage(T.AGENT_START, 1, 1, encodeValue({ ints: [1], doubles: [2] }));
  assert.ok(Buffer.from(head).includes(Buffer.from("cb4000000000000000", "hex")));
  assert.equal(ErrorCode.MALFORMED, 1);
});
