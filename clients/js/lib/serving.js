"use strict";
/**
 * What the agent server (server.js) and the environment server (environment.js) share: the
 * command line, the typed queries (PROTOCOL.md section 8), the RequestServer base that checks every
 * envelope, the HELLO and the state, and keeps one session at a time (sections 5, 12, 13), and
 * the ROUTER loop with CURVE. A subclass names its role and serves its own types in dispatch().
 */
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const zmq = require("zeromq");
const { performance } = require("node:perf_hooks");
const {
  PROTOCOL_VERSION, versionMismatchText, MAX_MESSAGE_BYTES, MessageType: T, TYPE_NAMES,
  BATCHED_TYPES, ErrorCode, ERROR_NAMES, ProtocolError, encodeMessage, decodeEnvelope,
  describe, arrayItemKinds, arrayItems,
} = require("./protocol");
const { CurveError, loadCurve, runZap } = require("./curve");

const IMPLEMENTATION = "rlbridge-js";
const LANGUAGE = "javascript";
const LINGER_MS = 200;
/** A session whose owner has sent nothing for this long ends: another experiment may start. */
const SESSION_IDLE_MS = 60000;
const ROLES = ["experiment", "environment", "agent"];

function logger(role) {
  return (text) => process.stderr.write(`rlbridge ${role}: ${text}\n`);
}

// ---- command line ---------------------------------------------------------------------------

function isLoopback(address) {
  if (!address.startsWith("tcp://")) return true;
  const host = address.slice(6);
  return host.startsWith("127.") || host.startsWith("localhost:") || host.startsWith("[::1]:");
}

/** What the "serving NAME on ADDR" line adds: who may connect (curve.py's exposure). */
function exposure(options) {
  if (options.curveDir) return " with CURVE";
  if (options.connect || !options.address.startsWith("tcp://")) return "";
  if (isLoopback(options.address)) {
    return " (loopback tcp without CURVE: any user of this machine may connect)";
  }
  return " (tcp without CURVE: anyone who reaches this address may connect)";
}

/** transport.py's default_address: $RLBRIDGE_AGENT_ADDR or ..._ENV_ADDR, else a private ipc. */
function defaultAddress(role) {
  const variable = role === "environment" ? "RLBRIDGE_ENV_ADDR" : "RLBRIDGE_AGENT_ADDR";
  if (process.env[variable]) return process.env[variable];
  const directory = path.join(os.tmpdir(), `rlbridge-${process.getuid()}`);
  privateDirectory(directory);
  return `ipc://${directory}/${role === "environment" ? "env" : "agent"}.sock`;
}

// The default ipc directory sits in a shared temporary directory: had another user created it
// first, they could swap our socket for theirs. Throws an Error naming what is wrong.
function privateDirectory(directory) {
  try {
    fs.mkdirSync(directory, { mode: 0o700 });
  } catch (err) {
    if (err.code !== "EEXIST") throw err;
  }
  const info = fs.lstatSync(directory);
  const uid = process.getuid();
  if (!info.isDirectory()) {
    throw new Error(`${directory} must be a directory owned by uid ${uid}; it is a link or a file`);
  }
  if (info.uid !== uid) {
    throw new Error(`${directory} must be owned by uid ${uid}, but uid ${info.uid} owns it: ` +
      "refusing to bind sockets inside it");
  }
  if (info.mode & 0o022) {
    const mode = (info.mode & 0o7777).toString(8).padStart(4, "0");
    throw new Error(`${directory} must have mode 0700 (no group or other access), but has ` +
      `${mode}, writable by others: check its contents, then chmod 700 it`);
  }
  // Readable only by others: nobody else can have put a socket in it.
  if (info.mode & 0o077) fs.chmodSync(directory, 0o700);
}

/**
 * Parse [--bind ADDR | --connect ADDR] [--curve-dir DIR | --no-curve] [--idle-timeout-ms N]
 * [--max-message-bytes N] [--opt KEY=VALUE]... for a server of `role` ("agent" or
 * "environment"). Throws an Error with a usage message.
 */
function parseArgs(argv, role = "agent") {
  const options = { address: null, connect: false, curveDir: process.env.RLBRIDGE_CURVE_DIR || null,
    idleTimeoutMs: 0, maxMessageBytes: MAX_MESSAGE_BYTES, opts: {} };
  let noCurve = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--no-curve") { noCurve = true; continue; }
    const next = argv[i + 1];
    if (next === undefined) throw new Error(`${arg} needs a value`);
    i++;
    if (arg === "--bind") options.address = next;
    else if (arg === "--connect") { options.address = next; options.connect = true; }
    else if (arg === "--curve-dir") options.curveDir = next;
    else if (arg === "--idle-timeout-ms") options.idleTimeoutMs = Number(next);
    else if (arg === "--max-message-bytes") options.maxMessageBytes = Number(next);
    else if (arg === "--opt") {
      const equals = next.indexOf("=");
      if (equals <= 0) throw new Error(`--opt takes key=value; got '${next}'`);
      options.opts[next.slice(0, equals).trim()] = next.slice(equals + 1).trim();
    } else throw new Error(`unknown argument ${arg}`);
  }
  options.address = options.address || defaultAddress(role);
  if (noCurve) options.curveDir = null;
  else if (!options.connect && !isLoopback(options.address) && !options.curveDir) {
    throw new Error(`binding ${options.address} (not loopback) needs CURVE keys: run ` +
      "`rlbridge keys DIR` and pass --curve-dir DIR (or set RLBRIDGE_CURVE_DIR), or pass " +
      "--no-curve to accept anyone");
  }
  return options;
}

// ---- messages -------------------------------------------------------------------------------

/** The largest seed (PROTOCOL.md section 8): a uint64, as every implementation holds. */
const SEED_MAX = 2n ** 64n - 1n;

/** The codes of ENV_QUERY and AGENT_QUERY (PROTOCOL.md section 8). */
const Query = Object.freeze({
  SEED: 1, LEGAL_ACTIONS: 2, STATE: 3, OUTCOMES: 4, TIMING: 5, AUTORESET_NEXT_STEP: 6,
  COMMAND: 7,
});

/**
 * A query body [query, instance, argument] of `message`, checked (BAD_FIELD): {query, instance,
 * argument}, where a SEED's argument is a Number, or a BigInt above 2^53 - 1 (read from the
 * bytes: the decoder's numbers lose a uint64's low bits). `served`: the codes this role
 * answers; an instance other than nil or 0 is one this library (which does not batch) lacks.
 */
function readQuery(message, served) {
  const { body } = message;
  if (!Array.isArray(body) || body.length !== 3) {
    throw new ProtocolError(ErrorCode.BAD_FIELD, "a query body must be [query, instance, argument]");
  }
  const [query, instance, argument] = body;
  if (!served.includes(query)) {
    throw new ProtocolError(ErrorCode.BAD_FIELD, `query must be one of ${served.join(", ")}; ` +
      `got ${describe(query)}`);
  }
  if (instance !== null && instance !== 0) {
    throw new ProtocolError(ErrorCode.BAD_FIELD,
      `query instance must be nil or in 0..0; got ${describe(instance)}`);
  }
  if (query === Query.SEED) {
    const items = arrayItems(message.payload, message.bodyOffset);
    const item = items === null ? null : items[2];
    const big = item !== null && (item.kind === "int" || item.kind === "uint64")
      ? BigInt(item.kind === "int" ? item.int : item.uint) : -1n;
    if (big < 0n || big > SEED_MAX) {
      throw new ProtocolError(ErrorCode.BAD_FIELD,
        `SEED takes an int from 0 to ${SEED_MAX}; got ${item === null ? describe(argument) : item.kind}`);
    }
    return { query, instance, argument: big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big };
  }
  if (query === Query.COMMAND ? typeof argument !== "string" : argument !== null) {
    throw new ProtocolError(ErrorCode.BAD_FIELD, `query ${query} takes ` +
      `${query === Query.COMMAND ? "a string" : "a nil argument"}; got ${describe(argument)}`);
  }
  return { query, instance, argument };
}

/**
 * The words of a message (PROTOCOL.md section 8): split at runs of ASCII whitespace, as the
 * Python and C peers split them; any other character, a Unicode space or a NUL included, is
 * part of a word.
 */
function messageWords(text) {
  return text.split(/[ \t\n\v\f\r]+/).filter((word) => word !== "");
}


// ---- the request server ---------------------------------------------------------------------

/**
 * Checks and sessions of PROTOCOL.md sections 5, 12 and 13. A subclass sets `role`, `served`
 * (the types it serves), `peerRoles` (whose HELLO it takes), `initType` (the type that starts
 * a session), `ownerOnlyTypes`, and implements dispatch(message, outFrames, identity).
 */
class RequestServer {
  constructor(options) {
    this.options = options;
    this.session = null; // { owner: Buffer, startedMs, lastHeardMs } of the experiment served
    this.stopping = false;
    this.log = logger(this.role);
  }

  /** The reply frames to a request's frames (the envelope first) from client `identity`. */
  handle(parts, identity = Buffer.alloc(0)) {
    const [payload, ...frames] = parts;
    this.trackSession(identity);
    let message;
    try {
      message = decodeEnvelope(payload, frames, this.options.maxMessageBytes,
        (type) => this.checkServed(type));
    } catch (err) {
      return this.error(err.seq ?? 0, err.episode ?? 0, err);
    }
    const outFrames = [];
    const reply = (body) => encodeMessage(message.type, message.seq, message.episode, body,
      outFrames);
    const failed = (err) => this.error(message.seq, message.episode, err);
    try {
      const body = this.dispatch(message, outFrames, identity);
      // A request that waits on another peer (an environment's DELEGATE, RUN_EPISODE).
      if (body instanceof Promise) return body.then(reply, failed);
      return reply(body);
    } catch (err) {
      return failed(err);
    }
  }

  /** Release what the server holds besides its socket (an environment's agent connection). */
  close() {}

  /** Send `frames` to client `identity` ahead of its reply (runServer sets the socket). */
  async send(identity, frames) {
    await this.sendTo(identity, frames);
  }

  error(seq, episode, err) {
    const code = err instanceof ProtocolError ? err.code : ErrorCode.APPLICATION;
    const text = err instanceof ProtocolError ? err.message
      : `${this.role} raised ${err.name || "Error"}: ${err.message}`;
    this.log(`error ${ERROR_NAMES[code]}: ${text}`);
    return encodeMessage(T.ERROR, seq, episode, [code, text]);
  }

  checkServed(type) {
    if (BATCHED_TYPES.has(type)) {
      // PROTOCOL.md section 16: a peer that does not batch answers as if it did not know them,
      // so that an experiment tells "cannot batch" from "not now" (WRONG_STATE).
      throw new ProtocolError(ErrorCode.UNKNOWN_TYPE, `this ${this.role} does not batch: it ` +
        `does not serve ${TYPE_NAMES[type]} (${type}), nor any type of PROTOCOL.md section 16`);
    }
    if (!this.served.has(type)) {
      throw new ProtocolError(ErrorCode.WRONG_STATE,
        `the ${this.role} does not serve ${TYPE_NAMES[type]}; it serves ` +
        [...this.served].map((t) => TYPE_NAMES[t]).join(", "));
    }
  }

  /** HELLO, HEARTBEAT and SHUTDOWN, the same in every role; null for another type. */
  common(message, identity) {
    const { body } = message;
    switch (message.type) {
      case T.HELLO:
        this.checkHello(body, arrayItemKinds(message.payload, message.bodyOffset));
        return { reply: [this.role, PROTOCOL_VERSION, IMPLEMENTATION, LANGUAGE, this.name ?? ""] };
      case T.HEARTBEAT:
        return { reply: body };
      case T.SHUTDOWN:
        if (body !== null && typeof body !== "string") {
          throw new ProtocolError(ErrorCode.BAD_FIELD, `SHUTDOWN takes a str or nil body; got ${describe(body)}`);
        }
        this.ownerOnly(message.type, identity);
        if (this.isOwner(identity)) this.session = null;
        this.stopping = true;
        return { reply: null };
      default:
        return null;
    }
  }

  /** `kinds`: the msgpack kinds of the body's items (a version 1.0 is a float, not an int). */
  checkHello(body, kinds) {
    if (!Array.isArray(body) || body.length !== 5 || typeof body[0] !== "string" ||
        kinds === null || kinds[1] !== "int" || typeof body[2] !== "string" ||
        typeof body[3] !== "string" || typeof body[4] !== "string") {
      throw new ProtocolError(ErrorCode.BAD_FIELD,
        "hello body must be [role str, version int, implementation str, language str, name str]");
    }
    const [role, version, implementation] = body;
    if (!ROLES.includes(role)) {
      throw new ProtocolError(ErrorCode.BAD_FIELD,
        `hello role must be experiment, environment or agent; got '${role.slice(0, 64)}'`);
    }
    if (version !== PROTOCOL_VERSION) {
      throw new ProtocolError(ErrorCode.VERSION_MISMATCH,
        versionMismatchText(version, ` in the HELLO of ${implementation.slice(0, 64)}`));
    }
    if (!this.peerRoles.includes(role)) {
      throw new ProtocolError(ErrorCode.WRONG_STATE,
        `an ${this.role} takes HELLO from ${this.peerRoles.map((r) => `an ${r}`).join(" or ")}; ` +
        `got role ${role}`);
    }
  }

  text(body, what) {
    if (typeof body !== "string") {
      throw new ProtocolError(ErrorCode.BAD_FIELD, `${what} must be a str; got ${describe(body)}`);
    }
    return body;
  }

  nilBody(type, body) {
    if (body !== null) {
      throw new ProtocolError(ErrorCode.BAD_FIELD,
        `${TYPE_NAMES[type]} takes a nil body; got ${describe(body)}`);
    }
  }

  // ---- sessions: one experiment at a time, owned by the identity whose INIT began it --------

  isOwner(identity) {
    return this.session !== null && Buffer.compare(this.session.owner, identity) === 0;
  }

  /** A session ends when its owner says so or has been silent for SESSION_IDLE_MS. */
  trackSession(identity) {
    if (this.session === null) return;
    const now = performance.now();
    if (this.isOwner(identity)) this.session.lastHeardMs = now;
    else if (now - this.session.lastHeardMs >= SESSION_IDLE_MS) this.session = null;
  }

  started() {
    const seconds = Math.round((performance.now() - this.session.startedMs) / 1000);
    return `session started by ${TYPE_NAMES[this.initType]} ${seconds} s ago`;
  }

  claimSession(identity) {
    if (this.session === null || this.isOwner(identity)) return;
    throw new ProtocolError(ErrorCode.WRONG_STATE, `this ${this.role} already serves an ` +
      `experiment (${this.started()}); start another ${this.role} process for a second ` +
      "experiment");
  }

  /** Requests that would stop, reset or take over the owner's experiment: owner only. */
  ownerOnly(type, identity) {
    if (this.session === null || this.isOwner(identity)) return;
    const stop = type === T.SHUTDOWN ? " (or stop the process with SIGTERM)" : "";
    throw new ProtocolError(ErrorCode.WRONG_STATE, `this ${this.role} serves another client's ` +
      `experiment (${this.started()}); only that client may send ${TYPE_NAMES[type]}${stop}`);
  }

  startSession(identity) {
    if (this.isOwner(identity)) return;
    const now = performance.now();
    this.session = { owner: Buffer.from(identity), startedMs: now, lastHeardMs: now };
  }
}

/** Serve `server` until SHUTDOWN, SIGTERM/SIGINT or the idle timeout; resolves to an exit code. */
async function runServer(server, options, name, served = name) {
  const log = server.log;
  server.name = served; // what HELLO's reply says this server serves (PROTOCOL.md section 5)
  const socket = new zmq.Router({ linger: LINGER_MS });
  let zap = null;
  if (options.curveDir) {
    let curve;
    try {
      curve = loadCurve(options.curveDir);
    } catch (err) {
      if (!(err instanceof CurveError)) throw err;
      log(err.message);
      socket.close();
      return 2;
    }
    zap = new zmq.Reply({ linger: LINGER_MS });
    await zap.bind("inproc://zeromq.zap.01");
    runZap(zap, curve.authorized).catch(() => {});
    socket.curveServer = true;
    socket.curvePublicKey = curve.publicKey;
    socket.curveSecretKey = curve.secretKey;
    socket.zapDomain = "rlbridge";
    // Peers that fail before the ZAP handler is asked: wrong server key, or no CURVE at all.
    const reasons = {
      ERR_ZMTP_CRYPTOGRAPHIC: "its messages do not decrypt with our key (it has the wrong server key)",
      ERR_ZMTP_MECHANISM_MISMATCH: "it does not speak CURVE",
    };
    const lastLogged = new Map(); // a peer that keeps reconnecting is logged every 10 s at most
    const report = (event) => {
      const code = event.error && event.error.code;
      const text = `refused a peer on ${event.address}: the CURVE handshake failed: ` +
        `${reasons[code] || code || "no detail"}`;
      if (Date.now() - (lastLogged.get(text) ?? -Infinity) < 10000) return;
      lastLogged.set(text, Date.now());
      log(text);
    };
    socket.events.on("handshake:error:protocol", report);
    socket.events.on("handshake:error:other", report);
  }
  if (options.connect) socket.connect(options.address);
  else await socket.bind(options.address);
  log(`serving ${name} on ${options.address}${exposure(options)}`);
  let exitCode = 0;
  let idleTimer = null;
  const stop = () => {
    server.stopping = true;
    socket.close();
  };
  const resetIdle = () => {
    if (!options.idleTimeoutMs) return;
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => {
      log(`no request for ${options.idleTimeoutMs} ms; stopping`);
      exitCode = 1;
      stop();
    }, options.idleTimeoutMs);
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  resetIdle();
  try {
    while (!server.stopping) {
      let parts;
      try {
        parts = await socket.receive();
      } catch (err) {
        if (server.stopping) break;
        throw err;
      }
      const [identity, ...message] = parts;
      // A REQ client puts an empty delimiter frame first; its reply must carry it back.
      const delimiter = message.length > 1 && message[0].length === 0 ? message.splice(0, 1) : [];
      // Heartbeats of a delegated episode; none once a signal has closed the socket.
      server.sendTo = async (to, frames) => {
        if (!socket.closed) await socket.send([to, ...delimiter, ...frames]);
      };
      let reply = server.handle(message.length ? message : [Buffer.alloc(0)], identity);
      if (reply instanceof Promise) reply = await reply;
      if (socket.closed) break; // stopped while the request waited on another peer
      await socket.send([identity, ...delimiter, ...reply]);
      resetIdle();
    }
  } finally {
    clearTimeout(idleTimer);
    process.removeListener("SIGTERM", stop);
    process.removeListener("SIGINT", stop);
    if (!socket.closed) socket.close();
    if (zap) zap.close();
    server.close();
  }
  return exitCode;
}

module.exports = {
  IMPLEMENTATION, LANGUAGE, SESSION_IDLE_MS, SEED_MAX, RequestServer, runServer, parseArgs,
  isLoopback, messageWords, readQuery, Query, logger,
};
