"use strict";
/**
 * The rlbridge wire format (PROTOCOL.md sections 2, 3 and 5) in JavaScript: message types,
 * error codes, the envelope [version, type, seq, episode, body], and values
 * [ints, doubles, chars, arrays] with arrays as [dtype, shape, data].
 *
 * JavaScript numbers do not say whether 1 is an int or a float, so values that must travel
 * as float64 (rewards, a value's doubles) are wrapped in Float64 before encoding; the encoder
 * then writes them as msgpack float 64 exactly like the Python and C implementations.
 */
const { Encoder, Decoder } = require("@msgpack/msgpack");

const PROTOCOL_VERSION = 1;
const ZERO_COPY_THRESHOLD_BYTES = 64 * 1024;
const MAX_MESSAGE_BYTES = 256 * 1024 * 1024;

const MessageType = Object.freeze({
  HELLO: 1, ERROR: 2, HEARTBEAT: 3, SHUTDOWN: 4,
  ENV_INIT: 10, ENV_START: 11, ENV_STEP: 12, ENV_CLEANUP: 13, ENV_MESSAGE: 14,
  AGENT_INIT: 20, AGENT_START: 21, AGENT_STEP: 22, AGENT_END: 23, AGENT_CLEANUP: 24,
  AGENT_MESSAGE: 25, RUN_EPISODE: 30, DELEGATE: 31,
});
const TYPE_NAMES = Object.fromEntries(Object.entries(MessageType).map(([k, v]) => [v, k]));

const ErrorCode = Object.freeze({
  MALFORMED: 1, UNKNOWN_TYPE: 2, BAD_FIELD: 3, TOO_LARGE: 4, VERSION_MISMATCH: 5,
  INVALID_ACTION: 6, WRONG_STATE: 7, PEER_TIMEOUT: 8, PEER_ERROR: 9, APPLICATION: 10,
  SHUTDOWN: 11,
});
const ERROR_NAMES = Object.fromEntries(Object.entries(ErrorCode).map(([k, v]) => [v, k]));

const DTYPE_SIZES = Object.freeze({
  "|b1": 1, "|i1": 1, "|u1": 1, "<i2": 2, "<u2": 2, "<i4": 4, "<u4": 4, "<i8": 8, "<u8": 8,
  "<f4": 4, "<f8": 8,
});

/** An error that becomes an ERROR reply [code, message]. */
class ProtocolError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/** A number that must be encoded as msgpack float 64 even when it is whole. */
class Float64 {
  constructor(value) {
    this.value = value;
  }
}

class WireEncoder extends Encoder {
  doEncode(object, depth) {
    if (object instanceof Float64) {
      this.encodeNumberAsFloat(object.value);
    } else {
      super.doEncode(object, depth);
    }
  }
}

const encoder = new WireEncoder();
const decoder = new Decoder();

function describe(value) {
  if (value === null || value === undefined) return "nil";
  if (Array.isArray(value)) return "array";
  if (value instanceof Uint8Array) return "bin";
  if (typeof value === "number") return Number.isInteger(value) ? "int" : "float";
  if (typeof value === "bigint") return "int";
  if (typeof value === "string") return "str";
  if (typeof value === "boolean") return "bool";
  return "map";
}

/** The frames of one message: the envelope, then any zero-copy array frames. */
function encodeMessage(type, seq, episode, body = null, frames = [], version = PROTOCOL_VERSION) {
  const head = encoder.encode([version, type, seq, episode, body]);
  return [head, ...frames];
}

/** Check and decode the first frame; throws ProtocolError with the code of PROTOCOL.md. */
function decodeEnvelope(payload, frames = [], maxBytes = MAX_MESSAGE_BYTES) {
  const size = payload.length + frames.reduce((sum, f) => sum + f.length, 0);
  if (size > maxBytes) {
    throw new ProtocolError(ErrorCode.TOO_LARGE,
      `message of ${size} bytes exceeds the limit of ${maxBytes} bytes`);
  }
  let raw;
  try {
    raw = decoder.decode(payload);
  } catch (err) {
    throw new ProtocolError(ErrorCode.MALFORMED,
      "expected a msgpack envelope [version, type, seq, episode, body]; could not decode " +
      `${payload.length} bytes: ${err.message}`);
  }
  if (!Array.isArray(raw) || raw.length !== 5) {
    throw new ProtocolError(ErrorCode.MALFORMED,
      "expected a msgpack envelope [version, type, seq, episode, body]; got " +
      (Array.isArray(raw) ? `an array of ${raw.length} items` : describe(raw)));
  }
  const [version, type, seq, episode, body] = raw;
  if (![version, type, seq, episode].every((x) => Number.isInteger(x))) {
    throw new ProtocolError(ErrorCode.BAD_FIELD,
      "envelope fields version, type, seq and episode must be integers; got " +
      `(${[version, type, seq, episode].map(describe).join(", ")})`);
  }
  if (version !== PROTOCOL_VERSION) {
    throw new ProtocolError(ErrorCode.VERSION_MISMATCH,
      `protocol version mismatch: expected ${PROTOCOL_VERSION}, got ${version}`);
  }
  if (!(type in TYPE_NAMES)) {
    throw new ProtocolError(ErrorCode.UNKNOWN_TYPE,
      `unknown message type ${type}; expected one of ` +
      Object.entries(MessageType).map(([k, v]) => `${k}=${v}`).join(", "));
  }
  return { version, type, seq, episode, body, frames };
}

/**
 * Rebuild a value {ints, doubles, chars, arrays} from its wire form. Arrays are
 * {dtype, shape, data} with data a Uint8Array of little-endian bytes in C order.
 */
function decodeValue(raw, frames = []) {
  if (!Array.isArray(raw) || raw.length !== 4) {
    throw new ProtocolError(ErrorCode.BAD_FIELD,
      `a value must be the array [ints, doubles, chars, arrays]; got ${describe(raw)}`);
  }
  const [ints, doubles, chars, arrays] = raw;
  if (!Array.isArray(ints) || !Array.isArray(doubles) || typeof chars !== "string") {
    throw new ProtocolError(ErrorCode.BAD_FIELD,
      "a value's fields must be (array of ints, array of doubles, str); got " +
      `(${describe(ints)}, ${describe(doubles)}, ${describe(chars)})`);
  }
  if (!ints.every((x) => Number.isInteger(x))) {
    throw new ProtocolError(ErrorCode.BAD_FIELD, "value ints must all be integers");
  }
  if (!doubles.every((x) => typeof x === "number")) {
    throw new ProtocolError(ErrorCode.BAD_FIELD, "value doubles must all be numbers");
  }
  const decoded = [];
  if (arrays !== null && arrays !== undefined) {
    if (!Array.isArray(arrays)) {
      throw new ProtocolError(ErrorCode.BAD_FIELD, `value arrays must be an array; got ${describe(arrays)}`);
    }
    for (const entry of arrays) decoded.push(decodeArray(entry, frames));
  }
  return { ints, doubles, chars, arrays: decoded };
}

function decodeArray(entry, frames) {
  if (!Array.isArray(entry) || entry.length !== 3) {
    throw new ProtocolError(ErrorCode.BAD_FIELD, "an array must be [dtype, shape, data]");
  }
  let [dtype, shape, data] = entry;
  const itemsize = DTYPE_SIZES[dtype];
  if (itemsize === undefined) {
    throw new ProtocolError(ErrorCode.BAD_FIELD,
      `array dtype ${JSON.stringify(dtype)} is not one of ${Object.keys(DTYPE_SIZES).join(" ")}`);
  }
  if (!Array.isArray(shape) || !shape.every((n) => Number.isInteger(n) && n >= 0)) {
    throw new ProtocolError(ErrorCode.BAD_FIELD, "array shape must be a list of non-negative ints");
  }
  if (Number.isInteger(data)) {
    if (data < 0 || data >= frames.length) {
      throw new ProtocolError(ErrorCode.BAD_FIELD,
        `array refers to frame ${data}; the message has ${frames.length} extra frames`);
    }
    data = new Uint8Array(frames[data].buffer, frames[data].byteOffset, frames[data].length);
  } else if (!(data instanceof Uint8Array)) {
    throw new ProtocolError(ErrorCode.BAD_FIELD,
      `array data must be bin bytes or a frame index; got ${describe(data)}`);
  }
  const expected = itemsize * shape.reduce((a, b) => a * b, 1);
  if (data.length !== expected) {
    throw new ProtocolError(ErrorCode.BAD_FIELD,
      `array ${dtype}(${shape.join(", ")}) needs ${expected} bytes; got ${data.length}`);
  }
  return { dtype, shape, data };
}

/** The wire form of a value; arrays of 64 KiB or more go to `frames` (when given). */
function encodeValue(value, frames = null) {
  const ints = value.ints || [];
  const doubles = (value.doubles || []).map((x) => new Float64(x));
  const arrays = (value.arrays || []).map((array) => {
    const data = array.data instanceof Uint8Array ? array.data
      : new Uint8Array(array.data.buffer, array.data.byteOffset, array.data.byteLength);
    if (frames !== null && data.length >= ZERO_COPY_THRESHOLD_BYTES) {
      frames.push(data);
      return [array.dtype, array.shape, frames.length - 1];
    }
    return [array.dtype, array.shape, data];
  });
  return [ints, doubles, value.chars || "", arrays];
}

/** A reward: float64, or an int (PROTOCOL.md: receivers accept both). */
function readReward(raw) {
  if (typeof raw !== "number") {
    throw new ProtocolError(ErrorCode.BAD_FIELD, `reward must be a float; got ${describe(raw)}`);
  }
  return raw;
}

/** The ints of a value followed by every integer array flattened (the task spec's order). */
function flatInts(value) {
  const out = [...value.ints];
  for (const array of value.arrays) {
    const kind = array.dtype[1];
    if (kind === "f") continue;
    const view = new DataView(array.data.buffer, array.data.byteOffset, array.data.byteLength);
    const size = DTYPE_SIZES[array.dtype];
    for (let offset = 0; offset < array.data.length; offset += size) {
      if (size === 1) out.push(kind === "i" ? view.getInt8(offset) : view.getUint8(offset));
      else if (size === 2) out.push(kind === "i" ? view.getInt16(offset, true) : view.getUint16(offset, true));
      else if (size === 4) out.push(kind === "i" ? view.getInt32(offset, true) : view.getUint32(offset, true));
      else out.push(Number(kind === "i" ? view.getBigInt64(offset, true) : view.getBigUint64(offset, true)));
    }
  }
  return out;
}

module.exports = {
  PROTOCOL_VERSION, ZERO_COPY_THRESHOLD_BYTES, MAX_MESSAGE_BYTES, MessageType, TYPE_NAMES,
  ErrorCode, ERROR_NAMES, DTYPE_SIZES, ProtocolError, Float64, encodeMessage, decodeEnvelope,
  decodeValue, encodeValue, readReward, flatInts, encoder,
};
