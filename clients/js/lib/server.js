"use strict";
/**
 * The agent side of PROTOCOL.md over a ZeroMQ ROUTER socket: serve(agent, options) answers
 * HELLO, HEARTBEAT and SHUTDOWN itself, checks every envelope, and calls the agent's
 * agentInit / agentStart / agentStep / agentEnd / agentCleanup / agentMessage. Bad input gets
 * the ERROR reply of PROTOCOL.md section 5 and the server goes on serving. Requests outside
 * the agent state machine are WRONG_STATE, and one experiment (session) is served at a time.
 * REQ clients work too. With a CURVE key directory (made by `rlbridge keys DIR`, see curve.js)
 * the socket is encrypted and clients whose public key is not authorized are refused.
 */
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const zmq = require("zeromq");
const { performance } = require("node:perf_hooks");
const {
  PROTOCOL_VERSION, versionMismatchText, MAX_MESSAGE_BYTES, MessageType: T, TYPE_NAMES,
  BATCHED_TYPES, ErrorCode, ERROR_NAMES,
  ProtocolError, encodeMessage, decodeEnvelope, decodeValue, encodeValue, readReward, describe,
  arrayItemKinds,
} = require("./protocol");
const { parseTaskSpec } = require("./taskspec");
const { loadCurve, runZap, z85Encode } = require("./curve");

const IMPLEMENTATION = "rlbridge-js";
const LANGUAGE = "javascript";
const LINGER_MS = 200;
/** A session whose owner has sent nothing for this long ends: another experiment may start. */
const SESSION_IDLE_MS = 60000;
const SERVED = new Set([T.HELLO, T.HEARTBEAT, T.SHUTDOWN, T.AGENT_INIT, T.AGENT_START,
  T.AGENT_STEP, T.AGENT_END, T.AGENT_CLEANUP, T.AGENT_MESSAGE]);
/** HELLO roles that may talk to an agent; the other known role ("agent") gets WRONG_STATE. */
const PEER_ROLES = ["experiment", "environment"];

/**
 * PROTOCOL.md section 12's agent states: AGENT_INIT makes READY, AGENT_START and AGENT_STEP
 * RUNNING, AGENT_END ENDED, AGENT_CLEANUP FRESH; a failed request leaves the state as it was.
 */
const AgentState = Object.freeze({
  FRESH: "FRESH", READY: "READY", RUNNING: "RUNNING", ENDED: "ENDED",
});
const STATE_MEANINGS = Object.freeze({
  FRESH: "not initialised: send AGENT_INIT first",
  READY: "no episode started: send AGENT_START first",
  RUNNING: "inside an episode",
  ENDED: "the episode ended",
});

function log(text) {
  process.stderr.write(`rlbridge agent: ${text}\n`);
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

function defaultAddress() {
  if (process.env.RLBRIDGE_AGENT_ADDR) return process.env.RLBRIDGE_AGENT_ADDR;
  const directory = path.join(os.tmpdir(), `rlbridge-${process.getuid()}`);
  privateDirectory(directory);
  return `ipc://${directory}/agent.sock`;
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
 * [--max-message-bytes N] [--opt KEY=VALUE]... Throws an Error with a usage message.
 */
function parseArgs(argv) {
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
  options.address = options.address || defaultAddress();
  if (noCurve) options.curveDir = null;
  else if (!options.connect && !isLoopback(options.address) && !options.curveDir) {
    throw new Error(`binding ${options.address} (not loopback) needs CURVE keys: run ` +
      "`rlbridge keys DIR` and pass --curve-dir DIR (or set RLBRIDGE_CURVE_DIR), or pass " +
      "--no-curve to accept anyone");
  }
  return options;
}

// ---- the request loop -----------------------------------------------------------------------

/** The largest N of "seed N" (PROTOCOL.md section 8): a uint64, as every implementation holds. */
const SEED_MAX = 2n ** 64n - 1n;

/**
 * The words of a message (PROTOCOL.md section 8): split at runs of ASCII whitespace, as the
 * Python and C agents split them; any other character, a Unicode space or a NUL included, is
 * part of a word.
 */
function messageWords(text) {
  return text.split(/[ \t\n\v\f\r]+/).filter((word) => word !== "");
}

/**
 * Base class: "seed N" seeds (reply "ok") with N from 0 to 2^64 - 1, passed to seed() as a
 * Number, or as a BigInt above 2^53 - 1; a bad seed argument gets an "error: ..." string
 * naming its first 200 characters (messages are free text: they never raise), other messages "".
 */
class Agent {
  agentInit(spec) { this.spec = spec; }
  agentEnd() {}
  agentCleanup() {}
  seed() {}
  agentMessage(text) {
    const [command, ...rest] = messageWords(text);
    if (command !== "seed") return "";
    // Its length first: a BigInt of millions of digits takes long to build.
    const digits = rest.length === 1 && /^[0-9]+$/.test(rest[0]) ? rest[0].replace(/^0+(?=.)/, "")
      : "";
    if (digits !== "" && digits.length <= 20 && BigInt(digits) <= SEED_MAX) {
      const seed = BigInt(digits);
      this.seed(seed <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(seed) : seed);
      return "ok";
    }
    // 200 characters, not UTF-16 units: a character outside the BMP is never cut in two.
    const echo = Array.from(rest.join(" ").slice(0, 800)).slice(0, 200).join("");
    return `error: seed takes an integer from 0 to ${SEED_MAX}; got '${echo}'`;
  }
}

class AgentServer {
  constructor(agent, options) {
    this.agent = agent;
    this.options = options;
    this.state = AgentState.FRESH;
    this.session = null; // { owner: Buffer, startedMs, lastHeardMs } of the experiment served
    this.stopping = false;
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
    try {
      const outFrames = [];
      const body = this.dispatch(message, outFrames, identity);
      return encodeMessage(message.type, message.seq, message.episode, body, outFrames);
    } catch (err) {
      return this.error(message.seq, message.episode, err);
    }
  }

  error(seq, episode, err) {
    const code = err instanceof ProtocolError ? err.code : ErrorCode.APPLICATION;
    const text = err instanceof ProtocolError ? err.message
      : `agent raised ${err.name || "Error"}: ${err.message}`;
    log(`error ${ERROR_NAMES[code]}: ${text}`);
    return encodeMessage(T.ERROR, seq, episode, [code, text]);
  }

  checkServed(type) {
    if (BATCHED_TYPES.has(type)) {
      // PROTOCOL.md section 16: a peer that does not batch answers as if it did not know them,
      // so that an experiment tells "cannot batch" from "not now" (WRONG_STATE).
      throw new ProtocolError(ErrorCode.UNKNOWN_TYPE, `this agent does not batch: it does not ` +
        `serve ${TYPE_NAMES[type]} (${type}), nor any type of PROTOCOL.md section 16`);
    }
    if (!SERVED.has(type)) {
      throw new ProtocolError(ErrorCode.WRONG_STATE,
        `the agent does not serve ${TYPE_NAMES[type]}; it serves ` +
        [...SERVED].map((t) => TYPE_NAMES[t]).join(", "));
    }
  }

  // Body fields are checked first, then the state, then the agent is called. A request that
  // fails leaves the state as it was.
  dispatch(message, outFrames, identity) {
    const { body } = message;
    const agent = this.agent;
    switch (message.type) {
      case T.HELLO:
        this.checkHello(body, arrayItemKinds(message.payload, message.bodyOffset));
        return ["agent", PROTOCOL_VERSION, IMPLEMENTATION, LANGUAGE];
      case T.HEARTBEAT:
        return body;
      case T.SHUTDOWN:
        if (body !== null && typeof body !== "string") {
          throw new ProtocolError(ErrorCode.BAD_FIELD, `SHUTDOWN takes a str or nil body; got ${describe(body)}`);
        }
        this.ownerOnly(message.type, identity);
        if (this.isOwner(identity)) this.session = null;
        this.stopping = true;
        return null;
      case T.AGENT_INIT: {
        const spec = this.text(body, "task spec");
        this.claimSession(identity);
        agent.agentInit(parseTaskSpec(spec));
        this.state = AgentState.READY;
        this.startSession(identity);
        return null;
      }
      case T.AGENT_START: {
        const observation = decodeValue(body, message.frames);
        this.needState(message.type);
        const action = encodeValue(agent.agentStart(observation), outFrames);
        this.state = AgentState.RUNNING;
        return action;
      }
      case T.AGENT_STEP: {
        if (!Array.isArray(body) || body.length !== 2) {
          throw new ProtocolError(ErrorCode.BAD_FIELD, "agent_step body must be [reward, observation]");
        }
        const reward = readReward(body[0]);
        const observation = decodeValue(body[1], message.frames);
        this.needState(message.type);
        const action = encodeValue(agent.agentStep(reward, observation), outFrames);
        this.state = AgentState.RUNNING;
        return action;
      }
      case T.AGENT_END: {
        const reward = readReward(body);
        this.needState(message.type);
        agent.agentEnd(reward);
        this.state = AgentState.ENDED;
        return null;
      }
      case T.AGENT_CLEANUP:
        if (body !== null) {
          throw new ProtocolError(ErrorCode.BAD_FIELD, `AGENT_CLEANUP takes a nil body; got ${describe(body)}`);
        }
        this.needState(message.type);
        this.ownerOnly(message.type, identity);
        agent.agentCleanup();
        this.state = AgentState.FRESH;
        if (this.isOwner(identity)) this.session = null;
        return null;
      case T.AGENT_MESSAGE:
        return String(agent.agentMessage(this.text(body, "agent_message text")));
      default: // checkServed let through only the types above
        throw new ProtocolError(ErrorCode.WRONG_STATE, `the agent does not serve ${TYPE_NAMES[message.type]}`);
    }
  }

  /** `kinds`: the msgpack kinds of the body's items (a version 1.0 is a float, not an int). */
  checkHello(body, kinds) {
    if (!Array.isArray(body) || body.length !== 4 || typeof body[0] !== "string" ||
        kinds === null || kinds[1] !== "int" || typeof body[2] !== "string" ||
        typeof body[3] !== "string") {
      throw new ProtocolError(ErrorCode.BAD_FIELD,
        "hello body must be [role str, version int, implementation str, language str]");
    }
    const [role, version, implementation] = body;
    if (![...PEER_ROLES, "agent"].includes(role)) {
      throw new ProtocolError(ErrorCode.BAD_FIELD,
        `hello role must be experiment, environment or agent; got '${role.slice(0, 64)}'`);
    }
    if (version !== PROTOCOL_VERSION) {
      throw new ProtocolError(ErrorCode.VERSION_MISMATCH,
        versionMismatchText(version, ` in the HELLO of ${implementation.slice(0, 64)}`));
    }
    if (!PEER_ROLES.includes(role)) {
      throw new ProtocolError(ErrorCode.WRONG_STATE,
        `an agent takes HELLO from an experiment or an environment; got role ${role}`);
    }
  }

  text(body, what) {
    if (typeof body !== "string") {
      throw new ProtocolError(ErrorCode.BAD_FIELD, `${what} must be a str; got ${describe(body)}`);
    }
    return body;
  }

  // PROTOCOL.md section 12: AGENT_START and AGENT_CLEANUP need an AGENT_INIT since the last
  // cleanup; AGENT_STEP and AGENT_END need an episode started (in ENDED too: RL-Glue 3.0.4's
  // RL_step after a terminal step calls agentStep or agentEnd again, with no agentStart).
  needState(type) {
    const initialised = type === T.AGENT_START || type === T.AGENT_CLEANUP;
    const allowed = initialised ? this.state !== AgentState.FRESH
      : this.state === AgentState.RUNNING || this.state === AgentState.ENDED;
    if (allowed) return;
    throw new ProtocolError(ErrorCode.WRONG_STATE, `the agent cannot serve ${TYPE_NAMES[type]} ` +
      `in state ${this.state} (${STATE_MEANINGS[this.state]})`);
  }

  // ---- sessions: one experiment at a time, owned by the identity whose AGENT_INIT began it --

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

  claimSession(identity) {
    if (this.session === null || this.isOwner(identity)) return;
    const seconds = Math.round((performance.now() - this.session.startedMs) / 1000);
    throw new ProtocolError(ErrorCode.WRONG_STATE, "this agent already serves an experiment " +
      `(session started by AGENT_INIT ${seconds} s ago); start another agent process for a ` +
      "second experiment");
  }

  /** AGENT_CLEANUP and SHUTDOWN would reset or stop the owner's experiment: owner only. */
  ownerOnly(type, identity) {
    if (this.session === null || this.isOwner(identity)) return;
    const seconds = Math.round((performance.now() - this.session.startedMs) / 1000);
    const stop = type === T.SHUTDOWN ? " (or stop the process with SIGTERM)" : "";
    throw new ProtocolError(ErrorCode.WRONG_STATE, "this agent serves another client's " +
      `experiment (session started by AGENT_INIT ${seconds} s ago); only that client may send ` +
      `${TYPE_NAMES[type]}${stop}`);
  }

  startSession(identity) {
    if (this.isOwner(identity)) return;
    const now = performance.now();
    this.session = { owner: Buffer.from(identity), startedMs: now, lastHeardMs: now };
  }
}

/** Serve `agent` until SHUTDOWN, SIGTERM/SIGINT or the idle timeout; resolves to an exit code. */
async function serve(agent, options, name = "agent") {
  const server = new AgentServer(agent, options);
  const socket = new zmq.Router({ linger: LINGER_MS });
  let zap = null;
  if (options.curveDir) {
    const curve = loadCurve(options.curveDir);
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
      const reply = server.handle(message.length ? message : [Buffer.alloc(0)], identity);
      await socket.send([identity, ...delimiter, ...reply]);
      resetIdle();
    }
  } finally {
    clearTimeout(idleTimer);
    process.removeListener("SIGTERM", stop);
    process.removeListener("SIGINT", stop);
    if (!socket.closed) socket.close();
    if (zap) zap.close();
  }
  return exitCode;
}

module.exports = {
  Agent, AgentServer, AgentState, serve, parseArgs, isLoopback, z85Encode, IMPLEMENTATION, LANGUAGE,
  SESSION_IDLE_MS, SEED_MAX, messageWords,
};
