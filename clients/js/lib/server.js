"use strict";
/**
 * The agent side of PROTOCOL.md over a ZeroMQ ROUTER socket: serve(agent, options) answers
 * HELLO, HEARTBEAT and SHUTDOWN itself, checks every envelope, and calls the agent's
 * agentInit / agentStart / agentStep / agentEnd / agentCleanup / agentMessage. Bad input gets
 * the ERROR reply of PROTOCOL.md section 5 and the server goes on serving. Requests outside
 * the agent state machine are WRONG_STATE, and one experiment (session) is served at a time.
 * REQ clients work too. With a CURVE key directory (made by `rlbridge keys DIR`, see curve.js)
 * the socket is encrypted and clients whose public key is not authorized are refused.
 * The checks, sessions and socket loop it shares with environment.js are in serving.js.
 */
const {
  MessageType: T, TYPE_NAMES, ErrorCode, ProtocolError, decodeValue, encodeValue, readReward,
} = require("./protocol");
const { parseTaskSpec } = require("./taskspec");
const { z85Encode } = require("./curve");
const {
  IMPLEMENTATION, LANGUAGE, SESSION_IDLE_MS, SEED_MAX, RequestServer, runServer, parseArgs,
  isLoopback, messageWords, readQuery, Query,
} = require("./serving");

const SERVED = new Set([T.HELLO, T.HEARTBEAT, T.SHUTDOWN, T.AGENT_INIT, T.AGENT_START,
  T.AGENT_STEP, T.AGENT_END, T.AGENT_CLEANUP, T.AGENT_MESSAGE, T.AGENT_QUERY]);

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

/**
 * Base class: the SEED query (PROTOCOL.md section 8) calls seed() with N from 0 to 2^64 - 1, as
 * a Number, or as a BigInt above 2^53 - 1; agentMessage gets the user's text, "" by default.
 */
class Agent {
  agentInit(spec) { this.spec = spec; }
  agentEnd() {}
  agentCleanup() {}
  seed() {}
  agentMessage() { return ""; }
}

class AgentServer extends RequestServer {
  constructor(agent, options) {
    super(options);
    this.agent = agent;
    this.state = AgentState.FRESH;
  }

  get role() { return "agent"; }
  get served() { return SERVED; }
  get peerRoles() { return ["experiment", "environment"]; }
  get initType() { return T.AGENT_INIT; }

  // Body fields are checked first, then the state, then the agent is called. A request that
  // fails leaves the state as it was.
  dispatch(message, outFrames, identity) {
    const common = this.common(message, identity);
    if (common !== null) return common.reply;
    const { body } = message;
    const agent = this.agent;
    switch (message.type) {
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
        this.nilBody(message.type, body);
        this.needState(message.type);
        this.ownerOnly(message.type, identity);
        agent.agentCleanup();
        this.state = AgentState.FRESH;
        if (this.isOwner(identity)) this.session = null;
        return null;
      case T.AGENT_MESSAGE:
        return String(agent.agentMessage(this.text(body, "agent_message text")));
      case T.AGENT_QUERY: // an agent answers SEED alone
        agent.seed(readQuery(message, [Query.SEED]).argument);
        return null;
      default: // checkServed let through only the types above
        throw new ProtocolError(ErrorCode.WRONG_STATE, `the agent does not serve ${TYPE_NAMES[message.type]}`);
    }
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
}

/** Serve `agent` until SHUTDOWN, SIGTERM/SIGINT or the idle timeout; resolves to an exit code. */
async function serve(agent, options, name = "agent", served = name) {
  return runServer(new AgentServer(agent, options), options, name, served);
}

module.exports = {
  Agent, AgentServer, AgentState, serve, parseArgs, isLoopback, z85Encode, IMPLEMENTATION, LANGUAGE,
  SESSION_IDLE_MS, SEED_MAX, messageWords,
};
