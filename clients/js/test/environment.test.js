"use strict";
// The environment role in process: EnvironmentServer.handle over GridWalk, frames in and out.
const test = require("node:test");
const assert = require("node:assert/strict");
const { decode } = require("@msgpack/msgpack");
const { MessageType: T, ErrorCode, PROTOCOL_VERSION, encodeMessage } = require("../lib/protocol");
const { EnvironmentServer, Environment } = require("../lib/environment");
const { GridWalk } = require("../envs/gridwalk");

const OWNER = Buffer.from("owner");
const OTHER = Buffer.from("other");

function ask(server, type, body, identity = OWNER) {
  const [payload] = server.handle(encodeMessage(type, 5, 1, body), identity);
  const [, replyType, , , replyBody] = decode(payload);
  return { type: replyType, body: replyBody };
}

function error(reply, code) {
  assert.equal(reply.type, T.ERROR, JSON.stringify(reply));
  assert.equal(reply.body[0], code, reply.body[1]);
  return reply.body[1];
}

const ACTION = (move) => [[move], [], "", []];

test("the state machine of PROTOCOL.md section 12, and a refusal leaves the state", () => {
  const server = new EnvironmentServer(new GridWalk(), { maxMessageBytes: 1 << 20 });
  assert.match(error(ask(server, T.ENV_START, null), ErrorCode.WRONG_STATE),
    /^the environment cannot serve ENV_START in state FRESH \(not initialised/);
  assert.equal(ask(server, T.ENV_INIT, null).body, new GridWalk().envInit());
  assert.equal(server.state, "READY");
  error(ask(server, T.ENV_STEP, ACTION(1)), ErrorCode.WRONG_STATE);
  ask(server, T.ENV_START, null);
  assert.equal(server.state, "RUNNING");
  assert.equal(error(ask(server, T.ENV_STEP, ACTION(7)), ErrorCode.INVALID_ACTION),
    "action int 0 must be in [0, 3]; got 7");
  assert.equal(server.state, "RUNNING");
  for (const move of [1, 1, 3, 3, 3]) assert.equal(ask(server, T.ENV_STEP, ACTION(move)).body[2], false);
  const last = ask(server, T.ENV_STEP, ACTION(1)).body;
  assert.deepEqual([last[0], last[2], last[3]], [0, true, null]);
  assert.equal(server.state, "ENDED");
  assert.equal(ask(server, T.ENV_STEP, ACTION(1)).body[2], true); // RL_step past the end
  assert.equal(ask(server, T.ENV_CLEANUP, null).body, null);
  assert.equal(server.state, "FRESH");
});

test("one session at a time (PROTOCOL.md section 13); probes are served to anyone", () => {
  const server = new EnvironmentServer(new GridWalk(), { maxMessageBytes: 1 << 20 });
  ask(server, T.ENV_INIT, null);
  assert.match(error(ask(server, T.ENV_INIT, null, OTHER), ErrorCode.WRONG_STATE),
    /^this environment already serves an experiment \(session started by ENV_INIT 0 s ago\)/);
  assert.match(error(ask(server, T.ENV_CLEANUP, null, OTHER), ErrorCode.WRONG_STATE),
    /only that client may send ENV_CLEANUP$/);
  assert.equal(ask(server, T.ENV_QUERY, [1, null, 3], OTHER).body, null);
  assert.equal(ask(server, T.ENV_MESSAGE, "seed 3", OTHER).body, ""); // the user's text
  assert.equal(ask(server, T.HEARTBEAT, [1], OTHER).body[0], 1);
  error(ask(server, T.HELLO, ["agent", PROTOCOL_VERSION, "x", "y", ""]), ErrorCode.WRONG_STATE);
  assert.equal(ask(server, T.HELLO, ["experiment", PROTOCOL_VERSION, "x", "y", ""]).body[0],
    "environment");
});

test("a game that raises or returns no reward gets APPLICATION; the server goes on", () => {
  class Broken extends Environment {
    envInit() { return "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS (0 1) ACTIONS INTS (0 1) REWARDS (0 1) EXTRA"; }
    envStart() { return { ints: [0] }; }
    envStep(action) {
      if (action.ints[0] === 0) throw new RangeError("boom");
      return { observation: { ints: [0] } };
    }
  }
  const server = new EnvironmentServer(new Broken(), { maxMessageBytes: 1 << 20 });
  ask(server, T.ENV_INIT, null);
  ask(server, T.ENV_START, null);
  assert.equal(error(ask(server, T.ENV_STEP, ACTION(0)), ErrorCode.APPLICATION),
    "environment raised RangeError: boom");
  assert.match(error(ask(server, T.ENV_STEP, ACTION(1)), ErrorCode.APPLICATION), /reward: number/);
  assert.equal(server.state, "RUNNING");
  assert.equal(ask(server, T.ENV_MESSAGE, "legal_actions").body, "");
  assert.deepEqual(ask(server, T.ENV_QUERY, [2, null, null]).body, [null]);
  error(ask(server, T.ENV_QUERY, [1, null, "x"]), ErrorCode.BAD_FIELD);
  error(ask(server, T.ENV_QUERY, [2, 1, null]), ErrorCode.BAD_FIELD);
});
