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

/** PROTOCOL.md's changelog: version 1 peers are refused (shapes changed in 2). */
const PROTOCOL_VERSION = 3;
const ZERO_COPY_THRESHOLD_BYTES = 64 * 1024;
const MAX_MESSAGE_BYTES = 256 * 1024 * 1024;
/** Frames per message, the envelope included (PROTOCOL.md): more is TOO_LARGE. */
const MAX_MESSAGE_FRAMES = 1024;
const MAX_ARRAY_DIMS = 32;
/** The item size times the non-zero dimensions of an array's shape. */
const MAX_ARRAY_EXTENT_BYTES = 2n ** 62n;
/** Deeper nesting in the envelope's first items is not read from the bytes. */
const PEEK_MAX_DEPTH = 1100; // deeper than any msgpack reader of the project (Python's: 1024)
/**
 * Arrays and maps nested deeper than this in a body make the envelope MALFORMED (it cannot be
 * decoded), rather than an error later where the body is encoded again (a HEARTBEAT's echo).
 */
const MAX_BODY_DEPTH = 100;

const MessageType = Object.freeze({
  HELLO: 1, ERROR: 2, HEARTBEAT: 3, SHUTDOWN: 4,
  ENV_INIT: 10, ENV_START: 11, ENV_STEP: 12, ENV_CLEANUP: 13, ENV_MESSAGE: 14, ENV_QUERY: 17,
  AGENT_INIT: 20, AGENT_START: 21, AGENT_STEP: 22, AGENT_END: 23, AGENT_CLEANUP: 24,
  AGENT_MESSAGE: 25, AGENT_QUERY: 28, RUN_EPISODE: 30, DELEGATE: 31,
  // PROTOCOL.md section 16: known, so the vectors decode, but this library does not batch.
  ENV_BATCH_INIT: 15, ENV_BATCH_STEP: 16, AGENT_BATCH_INIT: 26, AGENT_BATCH_STEP: 27, RUN_BATCH: 32,
});
/** The batched types (PROTOCOL.md section 16). */
const BATCHED_TYPES = new Set([15, 16, 26, 27, 32]);
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

/**
 * An error that becomes an ERROR reply [code, message]. `seq` and `episode` are the request's
 * when its envelope could be read that far (the reply echoes them), else undefined.
 */
class ProtocolError extends Error {
  constructor(code, message, ids = {}) {
    super(message);
    this.code = code;
    this.seq = ids.seq;
    this.episode = ids.episode;
  }
}

/** A number that must be encoded as msgpack float 64 even when it is whole. */
class Float64 {
  constructor(value) {
    this.value = value;
  }
}

// A seq or episode past 2**53 is a BigInt (see peekItem): encoded as the int64 it came as.
class WireEncoder extends Encoder {
  doEncode(object, depth) {
    if (object instanceof Float64) {
      this.encodeNumberAsFloat(object.value);
    } else if (typeof object === "bigint") {
      this.encodeBigInt64(object);
    } else {
      super.doEncode(object, depth);
    }
  }
}

// The envelope array and the body add two levels to the deepest body MAX_BODY_DEPTH allows.
const encoder = new WireEncoder({ maxDepth: MAX_BODY_DEPTH + 2 });
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

const INT64_MAX = 2n ** 63n - 1n;

/** An int64 as a number when it is a safe integer, else as a BigInt. A number past 2**53
 * (even one a double holds exactly, such as -2**63) would be encoded back as a float. */
function exactInt(value) {
  const number = Number(value);
  return Number.isSafeInteger(number) && BigInt(number) === value ? number : value;
}

/**
 * Read one msgpack item at `offset` of `bytes`: { end, kind, int } with `int` the value of an
 * int64 integer (a BigInt past 2**53). null when the bytes end first (or nest too deep).
 * This tells a msgpack int from a whole float, which the decoder's numbers cannot.
 */
function peekItem(bytes, offset, depth = 0) {
  if (offset >= bytes.length || depth > PEEK_MAX_DEPTH) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const b = bytes[offset];
  const at = offset + 1;
  const fits = (n) => at + n <= bytes.length;
  const int = (end, value) => (end <= bytes.length ? { end, kind: "int", int: value } : null);
  const scalar = (end, kind) => (end <= bytes.length ? { end, kind } : null);
  const sized = (n, kind, extra = 0) => {
    if (!fits(n)) return null;
    const length = n === 1 ? bytes[at] : n === 2 ? view.getUint16(at) : view.getUint32(at);
    return scalar(at + n + extra + length, kind);
  };
  if (b <= 0x7f) return int(at, b);
  if (b >= 0xe0) return int(at, b - 0x100);
  switch (b) {
    case 0xcc: return fits(1) ? int(at + 1, view.getUint8(at)) : null;
    case 0xcd: return fits(2) ? int(at + 2, view.getUint16(at)) : null;
    case 0xce: return fits(4) ? int(at + 4, view.getUint32(at)) : null;
    case 0xcf: {
      if (!fits(8)) return null;
      const value = view.getBigUint64(at);
      // A uint64 past int64 is no envelope int (it has no `int`); `uint` keeps its value.
      return value <= INT64_MAX ? int(at + 8, exactInt(value))
        : (at + 8 <= bytes.length ? { end: at + 8, kind: "uint64", uint: value } : null);
    }
    case 0xd0: return fits(1) ? int(at + 1, view.getInt8(at)) : null;
    case 0xd1: return fits(2) ? int(at + 2, view.getInt16(at)) : null;
    case 0xd2: return fits(4) ? int(at + 4, view.getInt32(at)) : null;
    case 0xd3: return fits(8) ? int(at + 8, exactInt(view.getBigInt64(at))) : null;
    case 0xc0: return scalar(at, "nil");
    case 0xc2: case 0xc3: return scalar(at, "bool");
    case 0xca: return scalar(at + 4, "float");
    case 0xcb: return scalar(at + 8, "float");
    case 0xd9: return sized(1, "str");
    case 0xda: return sized(2, "str");
    case 0xdb: return sized(4, "str");
    case 0xc4: return sized(1, "bin");
    case 0xc5: return sized(2, "bin");
    case 0xc6: return sized(4, "bin");
    case 0xc7: return sized(1, "ext", 1);
    case 0xc8: return sized(2, "ext", 1);
    case 0xc9: return sized(4, "ext", 1);
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
      return scalar(at + 1 + (1 << (b - 0xd4)), "ext");
    default: break;
  }
  if (b >= 0xa0 && b <= 0xbf) return scalar(at + (b & 0x1f), "str");
  let items;
  let end = at;
  if (b >= 0x80 && b <= 0x9f) items = b & 0x0f;
  else if ((b === 0xdc || b === 0xde) && fits(2)) { items = view.getUint16(at); end += 2; }
  else if ((b === 0xdd || b === 0xdf) && fits(4)) { items = view.getUint32(at); end += 4; }
  else return null; // 0xc1 is never used; or the bytes end
  const map = b <= 0x8f || b === 0xde || b === 0xdf;
  for (let i = 0; i < (map ? 2 * items : items); i++) {
    const item = peekItem(bytes, end, depth + 1);
    if (item === null) return null;
    end = item.end;
  }
  return { end, kind: map ? "map" : "array" };
}

/** The envelope's first four items read from its bytes, or null when it is no 5-item array. */
function peekHeader(payload) {
  const bytes = payload instanceof Uint8Array ? payload : new Uint8Array(payload);
  let offset;
  if (bytes[0] === 0x95) offset = 1;
  else if (bytes[0] === 0xdc && bytes.length >= 3 && bytes[1] === 0 && bytes[2] === 5) offset = 3;
  else if (bytes[0] === 0xdd && bytes.length >= 5 && bytes[1] === 0 && bytes[2] === 0 &&
    bytes[3] === 0 && bytes[4] === 5) offset = 5;
  else return null;
  const items = [];
  for (let i = 0; i < 4; i++) {
    const item = peekItem(bytes, offset);
    if (item === null) return null;
    items.push(item);
    offset = item.end;
  }
  return items;
}

/** Whether `value` has arrays or maps nested more than `limit` deep (without recursion). */
function nestedDeeperThan(value, limit) {
  const pending = [[value, 0]];
  while (pending.length > 0) {
    const [item, enclosing] = pending.pop();
    if (item === null || typeof item !== "object" || item instanceof Uint8Array) continue;
    if (enclosing + 1 > limit) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item)) {
      pending.push([child, enclosing + 1]);
    }
  }
  return false;
}

/**
 * The msgpack kinds ("int", "float", "str", ...) of the items of the array at `offset` of
 * `payload`, or null when no array starts there: whether a whole number came as an int, which
 * the decoded numbers cannot say.
 */
function arrayItemKinds(payload, offset) {
  const items = arrayItems(payload, offset);
  return items === null ? null : items.map((item) => item.kind);
}

/** The items of the array at `offset` as peekItem reads them ({kind, int}: a uint64's exact
 * value too), or null when there is none. */
function arrayItems(payload, offset) {
  const bytes = payload instanceof Uint8Array ? payload : new Uint8Array(payload);
  const b = bytes[offset];
  let items;
  let at = offset + 1;
  if (b >= 0x90 && b <= 0x9f) items = b & 0x0f;
  else if (b === 0xdc && at + 2 <= bytes.length) { items = (bytes[at] << 8) | bytes[at + 1]; at += 2; }
  else return null;
  const kinds = [];
  for (let i = 0; i < items; i++) {
    const item = peekItem(bytes, at);
    if (item === null) return null;
    kinds.push(item);
    at = item.end;
  }
  return kinds;
}

/** The VERSION_MISMATCH text of every implementation (PROTOCOL.md section 5). */
function versionMismatchText(got, where = "") {
  return `protocol version mismatch: expected ${PROTOCOL_VERSION}, got ${got}${where}; this ` +
    `implementation speaks only version ${PROTOCOL_VERSION} (PROTOCOL.md's changelog says what ` +
    "changed): run peers of the same protocol version";
}

const NOT_AN_ENVELOPE = "expected a msgpack envelope [version, type, seq, episode, body]";

/**
 * Check and decode the first frame in the order of PROTOCOL.md; throws ProtocolError with
 * the request's seq and episode whenever they are ints. `checkType(type)` (optional) throws
 * for a type the receiver's role does not serve, before the size check. A message with more
 * bytes than `maxBytes` or frames than MAX_MESSAGE_FRAMES is not decoded: only its first four
 * items are read, then it is TOO_LARGE.
 */
function decodeEnvelope(payload, frames = [], maxBytes = MAX_MESSAGE_BYTES, checkType = null) {
  const size = payload.length + frames.reduce((sum, f) => sum + f.length, 0);
  const count = 1 + frames.length;
  const tooLarge = size > maxBytes || count > MAX_MESSAGE_FRAMES;
  let raw = null;
  if (!tooLarge) {
    try {
      raw = decoder.decode(payload);
    } catch (err) {
      throw new ProtocolError(ErrorCode.MALFORMED,
        `${NOT_AN_ENVELOPE}; could not decode ${payload.length} bytes: ${err.message}`);
    }
    if (!Array.isArray(raw) || raw.length !== 5) {
      throw new ProtocolError(ErrorCode.MALFORMED, `${NOT_AN_ENVELOPE}; got ` +
        (Array.isArray(raw) ? `an array of ${raw.length} items` : describe(raw)));
    }
  }
  const header = peekHeader(payload);
  if (header === null) {
    throw new ProtocolError(ErrorCode.MALFORMED,
      `${NOT_AN_ENVELOPE}; the first of ${payload.length} bytes do not start one`);
  }
  const [version, type, seq, episode] = header.map((item) => item.int);
  const ids = seq !== undefined && episode !== undefined ? { seq, episode } : {};
  if (header.some((item) => item.int === undefined)) {
    throw new ProtocolError(ErrorCode.BAD_FIELD,
      "envelope fields version, type, seq and episode must be integers; got " +
      `(${header.map((item) => item.kind).join(", ")})`, ids);
  }
  if (version !== PROTOCOL_VERSION) {
    throw new ProtocolError(ErrorCode.VERSION_MISMATCH, versionMismatchText(version), ids);
  }
  if (!(type in TYPE_NAMES)) {
    throw new ProtocolError(ErrorCode.UNKNOWN_TYPE,
      `unknown message type ${type}; expected one of ` +
      Object.entries(MessageType).map(([k, v]) => `${k}=${v}`).join(", "), ids);
  }
  // After the header's own checks, as in the C receiver, whose reader stops at 32 levels.
  if (raw !== null && nestedDeeperThan(raw[4], MAX_BODY_DEPTH)) {
    throw new ProtocolError(ErrorCode.MALFORMED, `${NOT_AN_ENVELOPE}; could not decode ` +
      `${payload.length} bytes: the body nests arrays or maps more than ${MAX_BODY_DEPTH} deep`,
    ids);
  }
  if (checkType !== null) {
    try {
      checkType(type);
    } catch (err) {
      if (err instanceof ProtocolError) Object.assign(err, ids);
      throw err;
    }
  }
  if (tooLarge) {
    throw new ProtocolError(ErrorCode.TOO_LARGE, count > MAX_MESSAGE_FRAMES
      ? `message of ${count} frames exceeds the limit of ${MAX_MESSAGE_FRAMES} frames`
      : `message of ${size} bytes exceeds the limit of ${maxBytes} bytes`, ids);
  }
  return { version, type, seq, episode, body: raw[4], frames, payload, bodyOffset: header[3].end };
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
  if (shape.length > MAX_ARRAY_DIMS) {
    throw new ProtocolError(ErrorCode.BAD_FIELD,
      `an array has at most ${MAX_ARRAY_DIMS} dimensions; got ${shape.length}`);
  }
  // The extent skips zero dimensions: what a reader must be able to address.
  const extent = shape.reduce((bytes, n) => bytes * BigInt(n || 1), BigInt(itemsize));
  if (extent > MAX_ARRAY_EXTENT_BYTES) {
    throw new ProtocolError(ErrorCode.BAD_FIELD, `array shape [${shape.join(", ")}] spans ` +
      `${extent} bytes without its zero dimensions; the limit is ${MAX_ARRAY_EXTENT_BYTES}`);
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
  PROTOCOL_VERSION, versionMismatchText, ZERO_COPY_THRESHOLD_BYTES, MAX_MESSAGE_BYTES, MAX_MESSAGE_FRAMES,
  MAX_BODY_DEPTH, MAX_ARRAY_DIMS, MAX_ARRAY_EXTENT_BYTES, MessageType, TYPE_NAMES, BATCHED_TYPES,
  describe,
  ErrorCode, ERROR_NAMES, DTYPE_SIZES, ProtocolError, Float64, encodeMessage, decodeEnvelope,
  arrayItemKinds, arrayItems,
  decodeValue, encodeValue, readReward, flatInts, encoder,
};
