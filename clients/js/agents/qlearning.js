"use strict";
/**
 * Tabular Q-learning (Watkins) with epsilon-greedy exploration, for tasks with one int action.
 * A state is the observation's ints followed by its integer arrays (the task spec's order);
 * the actions are the legal ones from the legal mask, or the first action range.
 *
 * Options: alpha (0.1), gamma (1.0), epsilon (0.1), seed (0), load=PATH, save=PATH (written
 * at agent_cleanup). Messages: "seed N", "greedy" (epsilon 0), "states" (the number of states
 * seen). Tables are stored as msgpack, never code. Files come from the options or from save()
 * and load() called in this process, never from a message: any client may send one.
 */
const fs = require("node:fs");
const { encode, decode } = require("@msgpack/msgpack");
const { Agent } = require("../lib/server");
const { flatInts } = require("../lib/protocol");
const { legalActions, Rng } = require("../lib/taskspec");

/** The most bytes a table file may hold: anything larger is refused before it is read. */
const MAX_LOAD_BYTES = 256 * 1024 * 1024;
/** The messages that once named a file, and what the agent's user does instead. */
const NOT_SERVED = {
  save: "start the agent with --opt save=PATH (written at cleanup), or call agent.save(PATH) " +
    "in its own process",
  load: "start the agent with --opt load=PATH, or call agent.load(PATH) in its own process",
};

/** The bytes of `file`, once it has proved a regular file of at most MAX_LOAD_BYTES. */
function readRegular(file) {
  // O_NONBLOCK: opening a FIFO that has no writer returns at once instead of waiting.
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  try {
    const info = fs.fstatSync(fd);
    if (!info.isFile()) throw new Error(`load: ${file} is not a regular file`);
    if (info.size > MAX_LOAD_BYTES) {
      throw new Error(`load: ${file} holds ${info.size} bytes; expected at most ${MAX_LOAD_BYTES}`);
    }
    return fs.readFileSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

class QLearningAgent extends Agent {
  constructor(options = {}) {
    super();
    this.alpha = Number(options.alpha ?? 0.1);
    this.gamma = Number(options.gamma ?? 1.0);
    this.epsilon = Number(options.epsilon ?? 0.1);
    this.rng = new Rng(Number(options.seed || 0));
    this.savePath = options.save || null;
    this.table = new Map();
    if (options.load) this.load(options.load);
    this.previous = null;
  }

  seed(seed) { this.rng.seed(seed); }

  actions(observation) {
    const legal = legalActions(this.spec, observation);
    if (legal !== null) return legal.length ? legal : [this.spec.actionInts[0][0]];
    const [low, high] = this.spec.actionInts[0];
    return Array.from({ length: high - low + 1 }, (_, i) => low + i);
  }

  values(key) {
    let row = this.table.get(key);
    if (row === undefined) {
      row = new Map();
      this.table.set(key, row);
    }
    return row;
  }

  best(key, actions) {
    const row = this.values(key);
    let bestAction = actions[0];
    let bestValue = -Infinity;
    for (const action of actions) {
      const value = row.get(action) ?? 0;
      if (value > bestValue) { bestValue = value; bestAction = action; }
    }
    return [bestAction, bestValue];
  }

  choose(observation) {
    const key = flatInts(observation).join(",");
    const actions = this.actions(observation);
    const action = this.rng.next() < this.epsilon ? actions[this.rng.below(actions.length)]
      : this.best(key, actions)[0];
    this.previous = { key, action };
    return { ints: [action] };
  }

  update(target) {
    const { key, action } = this.previous;
    const row = this.values(key);
    const old = row.get(action) ?? 0;
    row.set(action, old + this.alpha * (target - old));
  }

  agentStart(observation) { return this.choose(observation); }

  agentStep(reward, observation) {
    const key = flatInts(observation).join(",");
    const [, next] = this.best(key, this.actions(observation));
    this.update(reward + this.gamma * next);
    return this.choose(observation);
  }

  agentEnd(reward) {
    if (this.previous) this.update(reward);
    this.previous = null;
  }

  agentCleanup() {
    if (this.savePath) this.save(this.savePath);
  }

  save(file) {
    const rows = {};
    for (const [key, row] of this.table) rows[key] = Object.fromEntries(row);
    fs.writeFileSync(file, encode({ kind: "rlbridge-js-qtable", rows }));
  }

  load(file) {
    const data = decode(readRegular(file));
    if (!data || data.kind !== "rlbridge-js-qtable") throw new Error(`${file} is not a Q table`);
    this.table = new Map(Object.entries(data.rows).map(([key, row]) =>
      [key, new Map(Object.entries(row).map(([a, v]) => [Number(a), v]))]));
  }

  agentMessage(text) {
    const [command] = text.trim().split(/\s+/, 1);
    if (Object.hasOwn(NOT_SERVED, command)) {
      return `error: ${command} is not served over the wire, where any client could choose the ` +
        `file; ${NOT_SERVED[command]}`;
    }
    if (command === "greedy") { this.epsilon = 0; return "ok"; }
    if (command === "states") return String(this.table.size);
    return super.agentMessage(text);
  }
}

module.exports = { QLearningAgent };
