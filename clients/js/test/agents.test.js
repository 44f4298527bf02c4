"use strict";
// The JS agents in process: task-spec reading, legal masks, seeding and Q-learning progress.
const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { parseTaskSpec, legalActions } = require("../lib/taskspec");
const { AgentServer, parseArgs, z85Encode } = require("../lib/server");
const {
  MessageType: T, ErrorCode, PROTOCOL_VERSION: V, encodeMessage, encodeValue,
} = require("../lib/protocol");
const { decode } = require("@msgpack/msgpack");
const { RandomAgent } = require("../agents/random");
const { FirstAgent } = require("../agents/first");
const { QLearningAgent } = require("../agents/qlearning");

const MINESWEEPER = "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS " +
  "(288 0 8) (144 0 1) ACTIONS INTS (0 143) REWARDS (-10.0 11.5) EXTRA ARRAYS " +
  '{"observations":[["|i1",[12,12,2]],["|b1",[144]]],"legal_mask":1} minesweeper rows=12';
const REVERSI = "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS " +
  '(144 0 1) (37 0 1) ACTIONS INTS (-1 35) REWARDS (-1.0 1.0) EXTRA ARRAYS {"observations":[["|b1",[37]]],"legal_mask":0}';
const BLACKJACK = "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS " +
  "(4 31) (1 10) (0 1) ACTIONS INTS (0 1) REWARDS (-1.0 1.0) EXTRA";

test("task specs give action ranges and the legal mask", () => {
  assert.deepEqual(parseTaskSpec(MINESWEEPER).actionInts, [[0, 143]]);
  assert.equal(parseTaskSpec(MINESWEEPER).legalMask, 1);
  assert.equal(parseTaskSpec(BLACKJACK).legalMask, null);
  assert.equal(parseTaskSpec(BLACKJACK).observationInts.length, 3);
  const spec = parseTaskSpec(REVERSI);
  const mask = new Uint8Array(37);
  mask[3] = 1; mask[20] = 1;
  assert.deepEqual(legalActions(spec, { ints: [], arrays: [{ dtype: "|b1", shape: [37], data: mask }] }), [2, 19]);
});

test("first and random agents respect the legal mask; seeding repeats random", () => {
  const spec = parseTaskSpec(REVERSI);
  const mask = new Uint8Array(37);
  mask[5] = 1; mask[9] = 1; mask[30] = 1;
  const observation = { ints: [], doubles: [], chars: "", arrays: [{ dtype: "|b1", shape: [37], data: mask }] };
  const first = new FirstAgent();
  first.agentInit(spec);
  assert.deepEqual(first.agentStart(observation).ints, [4]);
  const draws = (seed) => {
    const agent = new RandomAgent();
    agent.agentInit(spec);
    agent.seed(seed);
    return Array.from({ length: 20 }, () => agent.agentStep(0, observation).ints[0]);
  };
  assert.deepEqual(draws(7), draws(7));
  assert.ok(draws(7).every((a) => [4, 8, 29].includes(a)));
  assert.equal(new Set(draws(7)).size, 3);
});

test("the server answers hello, refuses out-of-order steps and keeps serving", () => {
  const server = new AgentServer(new FirstAgent(), { maxMessageBytes: 1 << 20 });
  const reply = (type, body) => decode(server.handle(encodeMessage(type, 5, 1, body))[0]);
  server.name = "first";
  assert.deepEqual(reply(T.HELLO, ["experiment", V, "test", "js", ""]),
    [V, T.HELLO, 5, 1, ["agent", V, "rlbridge-js", "javascript", "first"]]);
  const early = reply(T.AGENT_START, encodeValue({ ints: [3] }));
  assert.equal(early[1], T.ERROR);
  assert.equal(early[4][0], ErrorCode.WRONG_STATE);
  assert.equal(reply(T.ENV_STEP, null)[4][0], ErrorCode.WRONG_STATE);
  assert.equal(decode(server.handle([Buffer.from("c1", "hex")])[0])[4][0], ErrorCode.MALFORMED);
  assert.deepEqual(reply(T.AGENT_INIT, BLACKJACK), [V, T.AGENT_INIT, 5, 1, null]);
  assert.deepEqual(reply(T.AGENT_START, encodeValue({ ints: [13, 2, 0] }))[4], [[0], [], "", []]);
  assert.deepEqual(reply(T.AGENT_MESSAGE, "anything")[4], "");
  // "seed 12" is the user's text now: the SEED query seeds (PROTOCOL.md section 8).
  assert.deepEqual(reply(T.AGENT_MESSAGE, "seed 12")[4], "");
  assert.deepEqual(reply(T.AGENT_QUERY, [1, null, 12]), [V, T.AGENT_QUERY, 5, 1, null]);
  assert.deepEqual(reply(T.HEARTBEAT, [3]), [V, T.HEARTBEAT, 5, 1, [3]]);
});

test("binding a non-loopback tcp address needs CURVE keys unless --no-curve", () => {
  const saved = process.env.RLBRIDGE_CURVE_DIR;
  delete process.env.RLBRIDGE_CURVE_DIR;
  try {
    assert.throws(() => parseArgs(["--bind", "tcp://0.0.0.0:5556"]), /needs CURVE keys/);
    assert.equal(parseArgs(["--bind", "tcp://0.0.0.0:5556", "--no-curve"]).curveDir, null);
    assert.equal(parseArgs(["--bind", "tcp://127.0.0.1:5556"]).curveDir, null);
    assert.equal(parseArgs(["--bind", "tcp://*:5556", "--curve-dir", "/k"]).curveDir, "/k");
    assert.equal(parseArgs(["--connect", "tcp://experiment:5556"]).connect, true);
  } finally {
    if (saved !== undefined) process.env.RLBRIDGE_CURVE_DIR = saved;
  }
  // The Z85 example of ZeroMQ's RFC 32.
  assert.equal(z85Encode(Uint8Array.from([0x86, 0x4f, 0xd2, 0x6f, 0xb5, 0x59, 0xf7, 0x5b])), "HelloWorld");
});

/** A 4-cell corridor: start at 0, action 1 moves right, 0 left; -1 a step until cell 3. */
function corridorEpisode(agent, maxSteps = 100) {
  let cell = 0;
  const obs = () => ({ ints: [cell], doubles: [], chars: "", arrays: [] });
  let action = agent.agentStart(obs()).ints[0];
  let total = 0;
  for (let step = 1; step < maxSteps; step++) {
    cell = Math.max(0, Math.min(3, cell + (action === 1 ? 1 : -1)));
    total -= 1;
    if (cell === 3) { agent.agentEnd(-1); return total; }
    action = agent.agentStep(-1, obs()).ints[0];
  }
  return total;
}

test("Q-learning learns the corridor, and saves and loads its table", () => {
  const spec = parseTaskSpec("VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 " +
    "OBSERVATIONS INTS (0 3) ACTIONS INTS (0 1) REWARDS (-1.0 0.0) EXTRA");
  const agent = new QLearningAgent({ alpha: "0.5", epsilon: "0.1", seed: "3" });
  agent.agentInit(spec);
  for (let i = 0; i < 200; i++) corridorEpisode(agent);
  agent.agentMessage("greedy");
  assert.equal(corridorEpisode(agent), -3);
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "qtable-")), "q.msgpack");
  agent.save(file);
  const loaded = new QLearningAgent({ load: file, epsilon: "0" });
  loaded.agentInit(spec);
  assert.equal(loaded.agentMessage("states"), agent.agentMessage("states"));
  assert.equal(corridorEpisode(loaded), -3);
});

test("Q-learning serves no file over the wire, and loads only a regular file", () => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "qtable-"));
  const agent = new QLearningAgent();
  const victim = path.join(directory, "victim");
  fs.writeFileSync(victim, "the user's own bytes");
  for (const [message, option] of [[`save ${victim}`, "save="], [`load ${victim}`, "load="]]) {
    const reply = agent.agentMessage(message);
    assert.match(reply, /^error: (save|load) is not served over the wire/);
    assert.ok(reply.includes(`--opt ${option}PATH`), reply);
  }
  assert.equal(fs.readFileSync(victim, "utf8"), "the user's own bytes");
  assert.equal(agent.agentMessage("states"), "0");
  const fifo = path.join(directory, "fifo");
  require("node:child_process").execFileSync("mkfifo", [fifo]);
  // Opened blocking, a FIFO without a writer would hang the constructor here.
  assert.throws(() => new QLearningAgent({ load: fifo }), /is not a regular file/);
  assert.throws(() => new QLearningAgent({ load: "/dev/zero" }), /is not a regular file/);
});

test("checks run in PROTOCOL.md's order and errors echo seq and episode when readable", () => {
  const server = new AgentServer(new FirstAgent(), { maxMessageBytes: 1 << 20 });
  const { encode } = require("@msgpack/msgpack");
  const raw = (...items) => decode(server.handle([Buffer.from(encode(items))])[0]);
  // A string version is BAD_FIELD; version 1 with an unknown type is VERSION_MISMATCH.
  assert.deepEqual(raw("1", T.HELLO, 7, 3, null).slice(1, 4), [T.ERROR, 7, 3]);
  assert.equal(raw("1", T.HELLO, 7, 3, null)[4][0], ErrorCode.BAD_FIELD);
  assert.equal(raw(1, 99, 7, 3, null)[4][0], ErrorCode.VERSION_MISMATCH);
  assert.deepEqual(raw(V, 99, 8, 4, null)[4][0], ErrorCode.UNKNOWN_TYPE);
  assert.deepEqual(raw(V, T.ENV_STEP, 9, 5, null).slice(2, 4), [9, 5]);
  // A whole float is not an int, though JavaScript numbers cannot tell: the bytes can.
  const float = decode(server.handle([Buffer.from("95cb3ff000000000000001" + "0203c0", "hex")])[0]);
  assert.deepEqual(float.slice(1, 4), [T.ERROR, 2, 3]);
  assert.equal(float[4][0], ErrorCode.BAD_FIELD);
  // A string seq cannot be echoed.
  assert.deepEqual(raw(V, T.HELLO, "7", 3, null).slice(2, 4), [0, 0]);
  // A body error comes before a state error: AGENT_STEP with a bad body in FRESH.
  assert.equal(raw(V, T.AGENT_STEP, 1, 1, 5)[4][0], ErrorCode.BAD_FIELD);
  assert.equal(raw(V, T.AGENT_CLEANUP, 1, 1, 5)[4][1], "AGENT_CLEANUP takes a nil body; got int");
});

test("array shapes are bounded; frames are bounded; a bad SEED query is BAD_FIELD", () => {
  const server = new AgentServer(new FirstAgent(), { maxMessageBytes: 1 << 20 });
  const reply = (type, body, frames = []) =>
    decode(server.handle([...encodeMessage(type, 5, 2, body), ...frames])[0]);
  assert.deepEqual(reply(T.AGENT_INIT, BLACKJACK), [V, T.AGENT_INIT, 5, 2, null]);
  const array = (shape) => [[], [], "", [["|u1", shape, new Uint8Array(0)]]];
  assert.equal(reply(T.AGENT_START, array(new Array(33).fill(0)))[4][0], ErrorCode.BAD_FIELD);
  assert.equal(reply(T.AGENT_START, array([2 ** 31, 2 ** 31, 2]))[4][0], ErrorCode.BAD_FIELD);
  // Zero dimensions are left out of the extent: an empty array may have a huge dimension.
  assert.deepEqual(reply(T.AGENT_START, array([0, 2 ** 40]))[4], [[0], [], "", []]);
  assert.equal(reply(T.AGENT_START, array([0, 2 ** 40, 2 ** 30]))[4][0], ErrorCode.BAD_FIELD);
  const many = Array.from({ length: 1024 }, () => Buffer.alloc(0));
  assert.deepEqual(reply(T.AGENT_MESSAGE, "x", many).slice(1, 4), [T.ERROR, 5, 2]);
  assert.equal(reply(T.AGENT_MESSAGE, "x", many)[4][0], ErrorCode.TOO_LARGE);
  assert.equal(reply(T.AGENT_MESSAGE, "x", many.slice(1))[4], "");
  assert.equal(reply(T.AGENT_QUERY, [1, null, 3])[4], null);
  assert.equal(reply(T.AGENT_QUERY, [1, null, 2n ** 60n])[4], null); // past 2^53: a BigInt
  for (const body of [[1, null, "x"], [1, null, -1], [1, null, null], [2, null, null], [1, 1, 3],
    [1, null], "seed 3"]) {
    assert.equal(reply(T.AGENT_QUERY, body)[4][0], ErrorCode.BAD_FIELD, String(body));
  }
});

test("the agent state table: ENDED after AGENT_END, stepping past it, no cleanup when FRESH", () => {
  const server = new AgentServer(new FirstAgent(), { maxMessageBytes: 1 << 20 });
  const reply = (type, body) => decode(server.handle(encodeMessage(type, 5, 1, body))[0]);
  const code = (type, body) => { const r = reply(type, body); return r[1] === T.ERROR ? r[4][0] : "ok"; };
  const observation = encodeValue({ ints: [13, 2, 0] });
  assert.equal(code(T.AGENT_CLEANUP, null), ErrorCode.WRONG_STATE);
  assert.equal(server.state, "FRESH");
  assert.equal(code(T.AGENT_INIT, BLACKJACK), "ok");
  assert.equal(code(T.AGENT_END, 1.0), ErrorCode.WRONG_STATE);
  assert.equal(code(T.AGENT_START, observation), "ok");
  assert.equal(code(T.AGENT_END, 1.0), "ok");
  assert.equal(server.state, "ENDED");
  // RL-Glue 3.0.4's RL_step after a terminal step: agent_step or agent_end again.
  assert.equal(code(T.AGENT_END, 1.0), "ok");
  assert.equal(server.state, "ENDED");
  assert.equal(code(T.AGENT_STEP, [0.5, observation]), "ok");
  assert.equal(server.state, "RUNNING");
  // A failed request leaves the state as it was.
  assert.equal(code(T.AGENT_END, "x"), ErrorCode.BAD_FIELD);
  assert.equal(server.state, "RUNNING");
  assert.equal(code(T.AGENT_CLEANUP, null), "ok");
  assert.equal(server.state, "FRESH");
  assert.match(reply(T.AGENT_STEP, [0.5, observation])[4][1],
    /^the agent cannot serve AGENT_STEP in state FRESH \(not initialised: send AGENT_INIT first\)$/);
});

test("HELLO fields have their msgpack types, and bodies nest at most 100 deep", () => {
  const server = new AgentServer(new FirstAgent(), { maxMessageBytes: 1 << 20 });
  const reply = (type, body) => decode(server.handle(encodeMessage(type, 5, 1, body))[0]);
  for (const body of [["agent", "1", "x", "y", ""], ["agent", 1, 2, 3, ""],
    ["experiment", 1, "x", null, ""], ["experiment", V, "x", "y"], ["experiment", V, "x", "y", 5]]) {
    assert.equal(reply(T.HELLO, body)[4][0], ErrorCode.BAD_FIELD, JSON.stringify(body));
  }
  // ["experiment", 1.0, "x", "y", ""]: a float version, which the decoded number cannot show.
  const floatVersion = Buffer.from("95030105019" + "5aa6578706572696d656e74cb3ff0000000000000a178a179a0", "hex");
  assert.equal(decode(server.handle([floatVersion])[0])[4][0], ErrorCode.BAD_FIELD);
  const nested = (depth) => Buffer.concat([Buffer.from("9503030703", "hex"),
    Buffer.alloc(depth, 0x91), Buffer.from("a178", "hex")]);
  assert.deepEqual(decode(server.handle([nested(100)])[0]).slice(0, 4), [V, T.HEARTBEAT, 7, 3]);
  for (const depth of [101, 100000]) {
    const error = decode(server.handle([nested(depth)])[0]);
    assert.deepEqual(error.slice(0, 4), [V, T.ERROR, 7, 3]); // seq and episode can be read
    assert.equal(error[4][0], ErrorCode.MALFORMED);
  }
});
