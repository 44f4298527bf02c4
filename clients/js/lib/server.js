"use strict";
/**
 * The agent side of PROTOCOL.md over a ZeroMQ ROUTER socket: serve(agent, options) answers
 * HELLO, HEARTBEAT and SHUTDOWN itself, checks every envelope, and calls the agent's
 * agentInit / agentStart / agentStep / agentEnd / agentCleanup / agentMessage. Bad input gets
 * the ERROR reply of PROTOCOL.md section 5 and the server goes on serving. With a CURVE key
 * directory (made by `rlbridge keys DIR`) the socket is encrypted and a ZAP handler refuses,
 * and logs, clients whose public key is not in DIR/authorized_clients.
 */
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const zmq = require("zeromq");
const {
  PROTOCOL_VERSION, MAX_MESSAGE_BYTES, MessageType: T, TYPE_NAMES, ErrorCode, ERROR_NAMES,
  ProtocolError, encodeMessage, decodeEnvelope, decodeValue, encodeValue, readReward,
} = require("./protocol");
const { parseTaskSpec } = require("./taskspec");

const IMPLEMENTATION = "rlbridge-js";
const LANGUAGE = "javascript";
const LINGER_MS = 200;

function log(text) {
  process.stderr.write(`rlbridge agent: ${text}\n`);
}

// ---- CURVE ----------------------------------------------------------------------------------

const Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

function z85Encode(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length; i += 4) {
    let value = ((bytes[i] << 24) >>> 0) + (bytes[i + 1] << 16) + (bytes[i + 2] << 8) + bytes[i + 3];
    let chunk = "";
    for (let k = 0; k < 5; k++) {
      chunk = Z85[value % 85] + chunk;
      value = Math.floor(value / 85);
    }
    out += chunk;
  }
  return out;
}

/** A key (Z85) from a ZeroMQ certificate file: `public-key = "..."` or `secret-key = "..."`. */
function readKey(file, field) {
  const match = fs.readFileSync(file, "utf8").match(new RegExp(`${field}\\s*=\\s*"([^"]{40})"`));
  if (!match) throw new Error(`${file} has no ${field}`);
  return match[1];
}

function loadCurve(directory) {
  const secretFile = path.join(directory, "server.key_secret");
  const authorizedDir = path.join(directory, "authorized_clients");
  const authorized = new Set(fs.readdirSync(authorizedDir)
    .filter((name) => name.endsWith(".key"))
    .map((name) => readKey(path.join(authorizedDir, name), "public-key")));
  return {
    publicKey: readKey(secretFile, "public-key"),
    secretKey: readKey(secretFile, "secret-key"),
    authorized,
  };
}

/** Answer ZAP requests (RFC 27) for this process's context: allow authorized client keys. */
async function runZap(zap, authorized) {
  for await (const frames of zap) {
    const [version, requestId, , address, , mechanism, key] = frames;
    const mechanismName = mechanism ? mechanism.toString() : "";
    const clientKey = key && key.length === 32 ? z85Encode(key) : "";
    const allowed = mechanismName === "CURVE" && authorized.has(clientKey);
    if (!allowed) {
      log(`refused a ${mechanismName} client from ${address}: its public key ` +
        `${clientKey || "(none)"} is not in authorized_clients`);
    }
    await zap.send([version, requestId, allowed ? "200" : "400",
      allowed ? "OK" : "client key not authorized", allowed ? clientKey : "", ""]);
  }
}

// ---- command line ---------------------------------------------------------------------------

function isLoopback(address) {
  if (!address.startsWith("tcp://")) return true;
  const host = address.slice(6);
  return host.startsWith("127.") || host.startsWith("localhost:") || host.startsWith("[::1]:");
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

/** Base class: seeds on "seed N" (reply "ok") and answers "" to other messages. */
class Agent {
  agentInit(spec) { this.spec = spec; }
  agentEnd() {}
  agentCleanup() {}
  seed() {}
  agentMessage(text) {
    const words = text.trim().split(/\s+/);
    if (words.length === 2 && words[0] === "seed" && /^\d+$/.test(words[1])) {
      this.seed(Number(words[1]));
      return "ok";
    }
    return "";
  }
}

class AgentServer {
  constructor(agent, options) {
    this.agent = agent;
    this.options = options;
    this.initialized = false;
    this.stopping = false;
  }

  handle(parts) {
    const [payload, ...frames] = parts;
    let message;
    try {
      message = decodeEnvelope(payload, frames, this.options.maxMessageBytes);
    } catch (err) {
      return this.error(0, 0, err);
    }
    try {
      const outFrames = [];
      const body = this.dispatch(message, outFrames);
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

  dispatch(message, outFrames) {
    const { body } = message;
    const agent = this.agent;
    switch (message.type) {
      case T.HELLO: {
        if (!Array.isArray(body) || body.length !== 4) {
          throw new ProtocolError(ErrorCode.BAD_FIELD, "hello body must be [role, version, implementation, language]");
        }
        if (!["experiment", "environment", "agent"].includes(body[0])) {
          throw new ProtocolError(ErrorCode.BAD_FIELD, `hello role must be experiment, environment or agent; got ${body[0]}`);
        }
        if (body[1] !== PROTOCOL_VERSION) {
          throw new ProtocolError(ErrorCode.VERSION_MISMATCH,
            `protocol version mismatch: expected ${PROTOCOL_VERSION}, got ${body[1]} from ${body[2]}`);
        }
        return ["agent", PROTOCOL_VERSION, IMPLEMENTATION, LANGUAGE];
      }
      case T.HEARTBEAT:
        return body;
      case T.SHUTDOWN:
        this.stopping = true;
        return null;
      case T.AGENT_INIT:
        agent.agentInit(parseTaskSpec(this.text(body, "task spec")));
        this.initialized = true;
        return null;
      case T.AGENT_START:
        this.needInit("agent_start");
        return encodeValue(agent.agentStart(decodeValue(body, message.frames)), outFrames);
      case T.AGENT_STEP:
        this.needInit("agent_step");
        if (!Array.isArray(body) || body.length !== 2) {
          throw new ProtocolError(ErrorCode.BAD_FIELD, "agent_step body must be [reward, observation]");
        }
        return encodeValue(agent.agentStep(readReward(body[0]), decodeValue(body[1], message.frames)),
          outFrames);
      case T.AGENT_END:
        agent.agentEnd(readReward(body));
        return null;
      case T.AGENT_CLEANUP:
        agent.agentCleanup();
        return null;
      case T.AGENT_MESSAGE:
        return String(agent.agentMessage(this.text(body, "agent_message text")));
      default:
        throw new ProtocolError(ErrorCode.WRONG_STATE,
          `the agent does not serve ${TYPE_NAMES[message.type]}; it serves HELLO, HEARTBEAT, ` +
          "SHUTDOWN, AGENT_INIT, AGENT_START, AGENT_STEP, AGENT_END, AGENT_CLEANUP, AGENT_MESSAGE");
    }
  }

  text(body, what) {
    if (typeof body !== "string") throw new ProtocolError(ErrorCode.BAD_FIELD, `${what} must be a str`);
    return body;
  }

  needInit(call) {
    if (!this.initialized) throw new ProtocolError(ErrorCode.WRONG_STATE, `${call} needs agent_init first`);
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
  log(`serving ${name} on ${options.address}${options.curveDir ? " with CURVE" : ""}`);
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
      await socket.send([identity, ...server.handle(message.length ? message : [Buffer.alloc(0)])]);
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

module.exports = { Agent, AgentServer, serve, parseArgs, isLoopback, z85Encode, IMPLEMENTATION, LANGUAGE };
