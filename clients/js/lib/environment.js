"use strict";
/**
 * The environment side of PROTOCOL.md over a ZeroMQ ROUTER socket: serveEnvironment(env,
 * options) answers HELLO, HEARTBEAT and SHUTDOWN itself, checks every envelope, each action
 * against the task spec (INVALID_ACTION), the state machine of section 12 and the sessions of
 * section 13, and calls the environment's envInit / envStart / envStep / envCleanup /
 * envMessage. Bad input gets the ERROR reply of section 5 and the server goes on serving.
 * It plays delegated episodes (DELEGATE, RUN_EPISODE: section 6, in delegate.js) and does
 * not batch (section 16).
 */
const {
  MessageType: T, TYPE_NAMES, ErrorCode, ProtocolError, Float64, decodeValue, encodeValue,
  describe,
} = require("./protocol");
const { parseTaskSpec } = require("./taskspec");
const { RequestServer, runServer, parseArgs, messageWords, readQuery, Query } = require("./serving");
const { EpisodeRunner, delegateBody, runEpisodeBody, checkAgentAddress } = require("./delegate");

/** PROTOCOL.md section 12's environment states (BATCHED is never entered: no batching). */
const EnvState = Object.freeze({
  FRESH: "FRESH", READY: "READY", RUNNING: "RUNNING", ENDED: "ENDED",
});
// The same meanings as rlbridge/protocol/states.py, so both sides explain alike.
const STATE_MEANINGS = Object.freeze({
  FRESH: "not initialised: send ENV_INIT first",
  READY: "initialised, no episode started: send ENV_START first",
  RUNNING: "inside an episode",
  ENDED: "the episode ended: send ENV_START for the next one",
});
const ANY_STATE = [T.HELLO, T.HEARTBEAT, T.SHUTDOWN, T.ENV_INIT, T.ENV_MESSAGE, T.ENV_QUERY,
  T.DELEGATE];
const INITIALISED = [...ANY_STATE, T.ENV_START, T.ENV_CLEANUP, T.RUN_EPISODE];
/** The requests each state serves; ENV_STEP in ENDED is RL_step past a terminal step. */
const ALLOWED = Object.freeze({
  FRESH: new Set(ANY_STATE),
  READY: new Set(INITIALISED),
  RUNNING: new Set([...INITIALISED, T.ENV_STEP]),
  ENDED: new Set([...INITIALISED, T.ENV_STEP]),
});
const SERVED = new Set([...INITIALISED, T.ENV_STEP]);

/** An action the game refuses: the INVALID_ACTION reply, with `text` saying why. */
function invalidAction(text) {
  return new ProtocolError(ErrorCode.INVALID_ACTION, text);
}

/**
 * Base class: the typed queries (PROTOCOL.md section 8) call seed() (N as a Number, or a BigInt
 * above 2^53 - 1), legalActions() (null when every action in the task spec is legal) and
 * stateSnapshot() (null: nothing to draw); envMessage gets the user's text and passes it to
 * gameMessage(command, args), "" when that returns null.
 */
class Environment {
  envCleanup() {}
  seed() {}
  legalActions() { return null; }
  stateSnapshot() { return null; }
  gameMessage() { return null; }
  envMessage(text) {
    const [command = "", ...args] = messageWords(text);
    const reply = this.gameMessage(command, args);
    return reply === null || reply === undefined ? "" : String(reply);
  }
}

/** The ACTIONS part of a task spec as an action check (the INTS that parseTaskSpec reads). */
function actionChecker(specText) {
  const spec = parseTaskSpec(specText);
  const start = specText.indexOf(" ACTIONS ");
  const end = specText.indexOf(" REWARDS ", start);
  const section = specText.slice(start + 9, end < 0 ? undefined : end);
  const onlyInts = /^\s*INTS(\s*\([^)]*\))+\s*$/.test(section);
  const extra = specText.match(/EXTRA ARRAYS (\{.*?\})(?: |$)/);
  const arrayActions = extra !== null && /"actions"/.test(extra[1]);
  const bounds = spec.actionInts;
  const fmt = (x) => (x === -Infinity ? "NEGINF" : x === Infinity ? "POSINF"
    : Number.isNaN(x) ? "UNSPEC" : String(x));
  return (action) => {
    if (!onlyInts || arrayActions) return; // the game checks the rest itself
    // rlbridge/protocol/taskspec.py's texts, so either side names a bad action alike.
    if (action.doubles.length || action.chars.length || action.arrays.length) {
      throw invalidAction(`action must be ${bounds.length} ints and nothing else; got ` +
        `${action.doubles.length} doubles, ${action.chars.length} chars, ` +
        `${action.arrays.length} arrays`);
    }
    if (action.ints.length !== bounds.length) {
      throw invalidAction(`action must have ${bounds.length} ints; got ${action.ints.length}`);
    }
    action.ints.forEach((x, index) => {
      const [low, high] = bounds[index];
      if (x < low || x > high) {
        throw invalidAction(`action int ${index} must be in [${fmt(low)}, ${fmt(high)}]; got ${x}`);
      }
    });
  };
}

class EnvironmentServer extends RequestServer {
  constructor(env, options) {
    super(options);
    this.env = env;
    this.state = EnvState.FRESH;
    this.checkAction = null; // from the task spec of the last ENV_INIT
    this.episodes = new EpisodeRunner(this);
  }

  close() { this.episodes.closeAgent(); }

  get role() { return "environment"; }
  get served() { return SERVED; }
  get peerRoles() { return ["experiment"]; }
  get initType() { return T.ENV_INIT; }

  // Body fields are checked first, then the state, then the session, then the action, then
  // the environment is called. A request that fails leaves the state as it was.
  dispatch(message, outFrames, identity) {
    const { body, type } = message;
    const env = this.env;
    if (type === T.ENV_STEP) {
      const action = decodeValue(body, message.frames);
      this.needState(type);
      this.checkAction(action);
      const result = env.envStep(action);
      const reward = this.reward(result);
      const terminal = Boolean(result.terminal);
      const observation = encodeValue(result.observation, outFrames);
      this.state = terminal ? EnvState.ENDED : EnvState.RUNNING;
      return [new Float64(reward), observation, terminal, result.info ?? null];
    }
    if (type === T.ENV_MESSAGE) {
      return String(env.envMessage(this.text(body, "env_message text")));
    }
    if (type === T.ENV_QUERY) return this.query(readQuery(message, Object.values(Query)));
    if (type === T.DELEGATE) {
      // Another client's DELEGATE would redirect the owner's episodes.
      const delegation = delegateBody(body);
      checkAgentAddress(delegation.address, this.options.address || "", this.options.curveDir);
      this.needState(type);
      this.ownerOnly(type, identity);
      return this.episodes.configure(delegation).then(() => null);
    }
    if (type === T.RUN_EPISODE) {
      const maxSteps = runEpisodeBody(body);
      this.needState(type);
      this.ownerOnly(type, identity);
      // A delegated episode that fails is abandoned (ENDED); one cut off stays RUNNING.
      return this.episodes.run(message, maxSteps, this.checkAction, identity, outFrames).then((reply) => {
        this.state = reply[0] ? EnvState.ENDED : EnvState.RUNNING;
        return reply;
      }, (err) => {
        this.state = EnvState.ENDED;
        throw err;
      });
    }
    const common = this.common(message, identity);
    if (common !== null) return common.reply;
    this.nilBody(type, body);
    this.needState(type);
    switch (type) {
      case T.ENV_INIT: {
        this.claimSession(identity);
        const spec = String(env.envInit());
        this.checkAction = actionChecker(spec);
        this.state = EnvState.READY;
        this.startSession(identity);
        return spec;
      }
      case T.ENV_START: {
        const observation = encodeValue(env.envStart(), outFrames);
        this.state = EnvState.RUNNING;
        return observation;
      }
      case T.ENV_CLEANUP:
        this.ownerOnly(type, identity);
        env.envCleanup();
        this.state = EnvState.FRESH;
        this.checkAction = null;
        if (this.isOwner(identity)) this.session = null;
        return null;
      default: // checkServed let through only the types above
        throw new ProtocolError(ErrorCode.WRONG_STATE,
          `the environment does not serve ${TYPE_NAMES[type]}`);
    }
  }

  /** The reply to a query; this environment serves one instance, 0 (it does not batch). */
  query({ query, instance, argument }) {
    const env = this.env;
    const each = (reply) => (instance === null ? [reply] : reply);
    switch (query) {
      case Query.SEED: env.seed(argument); return null;
      case Query.LEGAL_ACTIONS: {
        const legal = env.legalActions();
        return each(legal === null ? null : [...legal].sort((a, b) => a - b));
      }
      case Query.STATE: return each(env.stateSnapshot() ?? null);
      case Query.COMMAND: return each(String(env.envMessage(argument)));
      case Query.TIMING: return [];
      case Query.AUTORESET_NEXT_STEP: return false;
      default: return null; // OUTCOMES: this library's games report none
    }
  }

  /** A game's reward must be a number: a bug in the game is APPLICATION, never bad input. */
  reward(result) {
    if (result === null || typeof result !== "object" || typeof result.reward !== "number") {
      throw new Error("envStep must return {reward: number, observation, terminal}; got " +
        describe(result && result.reward));
    }
    return result.reward;
  }

  // The text of rlbridge/protocol/states.py's wrong_state_text.
  needState(type) {
    const allowed = ALLOWED[this.state];
    if (allowed.has(type)) return;
    const served = [...allowed].sort((a, b) => a - b).map((t) => TYPE_NAMES[t]).join(", ");
    throw new ProtocolError(ErrorCode.WRONG_STATE, `the environment cannot serve ` +
      `${TYPE_NAMES[type]} in state ${this.state} (${STATE_MEANINGS[this.state]}); in ` +
      `${this.state} it serves ${served}`);
  }
}

/** Serve `env` until SHUTDOWN, SIGTERM/SIGINT or the idle timeout; resolves to an exit code. */
async function serveEnvironment(env, options, name = "environment", served = name) {
  return runServer(new EnvironmentServer(env, options), options, name, served);
}

module.exports = {
  Environment, EnvironmentServer, EnvState, serveEnvironment, invalidAction, actionChecker,
  parseArgs: (argv) => parseArgs(argv, "environment"),
};
