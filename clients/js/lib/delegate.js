"use strict";
/**
 * The environment's side of a delegated episode (PROTOCOL.md section 6), as
 * rlbridge/experiment/net/delegation.py plays it: DELEGATE connects a DEALER to the agent (HELLO
 * within DELEGATE_TIMEOUT_MS), RUN_EPISODE plays one episode with it under RL-Glue 3.0.4's
 * counting rules (section 7), sending the experiment HEARTBEAT [num_steps] at most once per
 * HEARTBEAT_INTERVAL_MS, and replies [terminal, num_steps, total_reward, last_action, records].
 * With DELEGATE's log true, `records` (and each heartbeat's) are the message records of the
 * calls to the agent, encoded as rlbridge/experiment/log/writer.py's RecordList encodes them.
 */
const zmq = require("zeromq");
const { performance } = require("node:perf_hooks");
const {
  PROTOCOL_VERSION, MessageType: T, TYPE_NAMES, ErrorCode, ProtocolError, Float64, encodeMessage,
  decodeEnvelope, decodeValue, encodeValue, describe, encoder,
} = require("./protocol");

/** An error code's name, as PEER_ERROR texts give the agent's code. */
const CODE_NAMES = Object.fromEntries(Object.entries(ErrorCode).map(([name, code]) => [code, name]));
const DELEGATE_TIMEOUT_MS = 5000;
const HEARTBEAT_INTERVAL_MS = 1000;
const POLL_INTERVAL_MS = 100;
const MAX_STEP_TIMEOUT_MS = 600000;
const LINGER_MS = 200;
// rlbridge/protocol/log_format.py's record kind and directions.
const MESSAGE = 1;
const SENT = 0;
const RECEIVED = 1;

const badField = (text) => new ProtocolError(ErrorCode.BAD_FIELD, text);
const callName = (type) => TYPE_NAMES[type].toLowerCase();
const repr = (value) => (typeof value === "string" ? `'${value}'` : describe(value)).slice(0, 80);

/** A DELEGATE body, checked as rlbridge/experiment/net/bodies.py's delegate_body checks it. */
function delegateBody(body) {
  if (!Array.isArray(body) || body.length !== 3) {
    throw badField(`DELEGATE body must be [agent_address, step_timeout_ms, log]; got ${describe(body)}`);
  }
  const [address, timeoutMs, log] = body;
  if (typeof address !== "string") throw badField(`agent_address must be a str; got ${describe(address)}`);
  if (!Number.isInteger(timeoutMs)) {
    throw badField(`step_timeout_ms must be an int; got ${describe(timeoutMs)}`);
  }
  if (timeoutMs < 1 || timeoutMs > MAX_STEP_TIMEOUT_MS) {
    throw badField(`step_timeout_ms must be in 1..${MAX_STEP_TIMEOUT_MS}; got ${timeoutMs}`);
  }
  if (log !== null && typeof log !== "boolean") {
    throw badField(`DELEGATE log must be nil, true or false; got ${describe(log)}`);
  }
  return { address, timeoutMs, log: log === true };
}

/** A RUN_EPISODE body: its max_steps, checked before any state changes. */
function runEpisodeBody(body) {
  if (!Array.isArray(body) || body.length !== 1) {
    throw badField(`RUN_EPISODE body must be [max_steps]; got ${describe(body)}`);
  }
  const maxSteps = body[0];
  if (!Number.isInteger(maxSteps)) throw badField(`max_steps must be an int; got ${describe(maxSteps)}`);
  if (maxSteps < 0) throw badField(`max_steps must be >= 0; got ${maxSteps}`);
  return maxSteps;
}

/** curve.py's check_agent_address: tcp:// or ipc:// only, and no ipc:// for an open tcp server. */
function checkAgentAddress(address, servedOn, curve) {
  if (!address.startsWith("tcp://") && !address.startsWith("ipc://")) {
    throw badField("agent_address must be a ZeroMQ endpoint such as tcp://host:port or " +
      `ipc:///path; got ${repr(address)}`);
  }
  if (address.startsWith("ipc://") && !curve && servedOn.startsWith("tcp://")) {
    throw badField(`agent_address ${repr(address)} is a socket file on this machine, and this ` +
      "environment serves tcp without CURVE, where any user may send DELEGATE: give the agent " +
      "a tcp:// address, or serve the environment on ipc:// or with CURVE keys");
  }
}

/** A DEALER to the agent that sends one request at a time, like client.py's RequestClient. */
class AgentClient {
  constructor(address, maxMessageBytes) {
    this.address = address;
    this.maxMessageBytes = maxMessageBytes;
    this.socket = new zmq.Dealer({ linger: LINGER_MS, receiveTimeout: POLL_INTERVAL_MS,
      sendTimeout: DELEGATE_TIMEOUT_MS });
    this.socket.connect(address);
    this.seq = 0;
    this.episode = 0;
    this.step = 0;
    this.timeoutMs = DELEGATE_TIMEOUT_MS;
    this.recorder = null; // (direction, type, seq, payload, frames) while DELEGATE asks for a log
  }

  timeoutText(type, waited) {
    return `agent at ${this.address} did not answer ${callName(type)} within ${waited} ms ` +
      `(episode ${this.episode}, step ${this.step})`;
  }

  /** The reply to a request; waits in POLL_INTERVAL_MS slices so that `stopping()` ends it. */
  async request(type, body, frames = [], stopping = () => false, timeoutMs = this.timeoutMs) {
    const seq = ++this.seq;
    const [head] = encodeMessage(type, seq, this.episode, body, frames);
    if (this.recorder !== null) this.recorder(SENT, type, seq, head, frames); // wire order
    try {
      await this.socket.send([head, ...frames]);
    } catch (err) {
      if (err.code !== "EAGAIN") throw err;
      throw new ProtocolError(ErrorCode.PEER_TIMEOUT, `agent at ${this.address} could not be ` +
        `reached to send ${callName(type)} within ${timeoutMs} ms (episode ${this.episode}, ` +
        `step ${this.step})`);
    }
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      let parts;
      try {
        parts = await this.socket.receive();
      } catch (err) {
        if (err.code !== "EAGAIN") throw err;
        if (!stopping() && performance.now() < deadline) continue;
        throw new ProtocolError(ErrorCode.PEER_TIMEOUT, this.timeoutText(type, timeoutMs));
      }
      const [payload, ...extra] = parts;
      let reply;
      try {
        reply = decodeEnvelope(payload, extra, this.maxMessageBytes);
      } catch (err) {
        throw new ProtocolError(err.code ?? ErrorCode.MALFORMED,
          `agent at ${this.address}: ${err.message}`);
      }
      if (reply.seq !== seq || reply.type === T.HEARTBEAT) continue; // a stale reply
      if (this.recorder !== null) this.recorder(RECEIVED, reply.type, seq, payload, extra);
      const where = `episode ${this.episode}, step ${this.step}`;
      if (reply.type === T.ERROR) {
        const b = reply.body;
        if (!Array.isArray(b) || b.length !== 2 || !Number.isInteger(b[0]) || typeof b[1] !== "string") {
          throw new ProtocolError(ErrorCode.PEER_ERROR, `agent at ${this.address} sent an ` +
            `ERROR reply without [code, message] to ${callName(type)} (${where})`);
        }
        throw new ProtocolError(ErrorCode.PEER_ERROR,
          `agent at ${this.address} replied to ${callName(type)} (${where}) with ` +
          `${CODE_NAMES[b[0]] ?? `code ${b[0]}`}: ${b[1]}`);
      }
      if (reply.type !== type) {
        throw new ProtocolError(ErrorCode.PEER_ERROR, `agent at ${this.address} answered ` +
          `${callName(type)} with ${TYPE_NAMES[reply.type] ? callName(reply.type) : `message type ${reply.type}`} (${where})`);
      }
      return reply;
    }
  }

  close() { this.socket.close(); }
}

/** delegation.py's _describe: an action as the agent sent it, cut short when it is large. */
function describeAction(action) {
  const ints = (xs) => `[${Array.from(xs).join(", ")}]`;
  // Python's repr of a float: 1.0, not 1.
  const doubles = (xs) => `[${Array.from(xs, (x) => (Number.isInteger(x) ? x.toFixed(1)
    : String(x))).join(", ")}]`;
  const parts = [];
  if (action.ints.length) parts.push(`ints ${ints(action.ints)}`);
  if (action.doubles.length) parts.push(`doubles ${doubles(action.doubles)}`);
  if (action.chars.length) parts.push(`chars '${action.chars}'`);
  if (action.arrays.length) parts.push(`${action.arrays.length} array(s)`);
  const text = parts.join(", ") || "empty";
  return text.length <= 120 ? text : `${text.slice(0, 117)}...`;
}

/** writer.py's RecordList: records kept in memory until take(), for the experiment's log. */
class RecordList {
  constructor(client) {
    this.bodies = [];
    this.record = (direction, type, seq, payload, frames) => {
      const nowNs = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)) * 1000n;
      this.bodies.push(encoder.encode([MESSAGE, "environment", direction, "agent", type, seq,
        client.episode, client.step, nowNs, payload, frames]));
    };
  }

  take() {
    const bodies = this.bodies;
    this.bodies = [];
    return bodies;
  }
}

/** Plays delegated episodes for an EnvironmentServer (its env, state, send and stopping). */
class EpisodeRunner {
  constructor(server, heartbeatIntervalMs = HEARTBEAT_INTERVAL_MS) {
    this.server = server;
    this.heartbeatIntervalMs = heartbeatIntervalMs;
    this.client = null; // kept across DELEGATEs to the same address
    this.agent = null; // set by a successful DELEGATE
    this.records = null; // a RecordList while DELEGATE asks for a log
  }

  /** DELEGATE, its body checked: a failure here leaves no delegation at all. */
  async configure({ address, timeoutMs, log }) {
    this.agent = null;
    this.records = null;
    const client = await this.connect(address);
    client.timeoutMs = timeoutMs;
    this.records = log ? new RecordList(client) : null;
    client.recorder = this.records === null ? null : this.records.record;
    this.agent = client;
  }

  async connect(address) {
    if (this.client !== null && this.client.address === address) return this.client;
    this.closeAgent();
    let client;
    try {
      client = new AgentClient(address, this.server.options.maxMessageBytes);
    } catch (err) { // ZeroMQ refuses the address itself
      throw badField("agent_address must be a ZeroMQ endpoint such as tcp://host:port or " +
        `ipc:///path; cannot connect to ${repr(address)}: ${err.message}`);
    }
    const stopping = () => this.server.stopping;
    try {
      const reply = await client.request(T.HELLO,
        ["environment", PROTOCOL_VERSION, "rlbridge-js", "javascript", ""], [], stopping,
        DELEGATE_TIMEOUT_MS);
      const b = reply.body;
      if (!Array.isArray(b) || b[1] !== PROTOCOL_VERSION) {
        throw new ProtocolError(ErrorCode.VERSION_MISMATCH, `agent at ${address} speaks ` +
          `protocol version ${Array.isArray(b) ? b[1] : describe(b)}; this environment ` +
          `speaks ${PROTOCOL_VERSION}`);
      }
    } catch (err) {
      client.close();
      if (err instanceof ProtocolError && err.code === ErrorCode.PEER_TIMEOUT) {
        throw new ProtocolError(ErrorCode.PEER_TIMEOUT, this.server.stopping
          ? `agent at ${address}: stopped waiting for its HELLO reply; the environment is ` +
            "shutting down"
          : `agent at ${address} did not answer HELLO within ${DELEGATE_TIMEOUT_MS} ms`);
      }
      if (err instanceof ProtocolError) throw new ProtocolError(ErrorCode.PEER_ERROR, err.message);
      throw err;
    }
    this.client = client;
    return client;
  }

  /** RUN_EPISODE [max_steps]: the reply body [terminal, num_steps, total_reward, last, nil]. */
  async run(message, maxSteps, checkAction, identity, outFrames) {
    if (this.agent === null) {
      throw new ProtocolError(ErrorCode.WRONG_STATE,
        "RUN_EPISODE needs a successful DELEGATE first (the agent's address)");
    }
    const records = this.records;
    let reply;
    try {
      reply = await this.play(message.episode, maxSteps, checkAction, identity, outFrames);
    } catch (err) {
      if (records !== null && records.bodies.length) {
        // The records of an abandoned episode still belong in the log: ahead of the ERROR.
        await this.server.send(identity, encodeMessage(T.HEARTBEAT, 0, message.episode,
          [this.agent.step, records.take()]));
      }
      throw err;
    }
    return [...reply, records === null ? null : records.take()];
  }

  async play(episode, maxSteps, checkAction, identity, outFrames) {
    const agent = this.agent;
    const server = this.server;
    const env = server.env;
    const stopping = () => server.stopping;
    agent.episode = episode;
    agent.step = 1;
    let nextBeat = performance.now() + this.heartbeatIntervalMs;
    let out = [];
    const first = encodeValue(env.envStart(), out);
    let reply = await agent.request(T.AGENT_START, first, out, stopping);
    let action = decodeValue(reply.body, reply.frames);
    // counting.py's EpisodeCounter, inline: RL_start sets step 1 and return 0.
    let numSteps = 1;
    let total = 0;
    let terminal = false;
    let running = maxSteps !== 1;
    while (running) {
      if (server.stopping) { // SIGTERM or SIGINT: the episode ends within a step
        throw new ProtocolError(ErrorCode.PEER_TIMEOUT, `episode ${episode} stopped at step ` +
          `${numSteps}: the environment is shutting down`);
      }
      try {
        checkAction(action);
      } catch (err) {
        if (!(err instanceof ProtocolError) || err.code !== ErrorCode.INVALID_ACTION) throw err;
        throw new ProtocolError(ErrorCode.INVALID_ACTION, `agent at ${agent.address} sent an ` +
          `invalid action in episode ${episode} for step ${numSteps}: ${err.message}; the ` +
          `action was ${describeAction(action)}; the episode is abandoned`);
      }
      const result = env.envStep(action);
      const reward = server.reward(result);
      total += reward;
      terminal = Boolean(result.terminal);
      if (terminal) {
        await agent.request(T.AGENT_END, new Float64(reward), [], stopping);
        break;
      }
      numSteps += 1;
      running = numSteps !== maxSteps;
      agent.step = numSteps;
      out = [];
      const observation = encodeValue(result.observation, out);
      reply = await agent.request(T.AGENT_STEP, [new Float64(reward), observation], out, stopping);
      action = decodeValue(reply.body, reply.frames);
      const now = performance.now();
      if (now >= nextBeat) {
        nextBeat = now + this.heartbeatIntervalMs;
        const records = this.records;
        await server.send(identity, encodeMessage(T.HEARTBEAT, 0, episode,
          records === null ? [numSteps] : [numSteps, records.take()]));
      }
    }
    const last = terminal ? null : encodeValue(action, outFrames);
    return [terminal, numSteps, new Float64(total), last];
  }

  /** Forget the agent and its connection: no delegation until the next DELEGATE. */
  closeAgent() {
    this.agent = null;
    if (this.client !== null) {
      this.client.close();
      this.client = null;
    }
  }
}

module.exports = {
  EpisodeRunner, delegateBody, runEpisodeBody, checkAgentAddress, describeAction, DELEGATE_TIMEOUT_MS,
  HEARTBEAT_INTERVAL_MS,
};
